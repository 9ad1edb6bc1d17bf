//! tcpdump's flags that `weir filter` does not have, refused by name.
//!
//! A tcpdump user types `weir filter -e -r trace.pcap tcp` from habit. Rather than clap's
//! "unexpected argument" and its tip about `--`, weir says which tcpdump option that is and
//! that weir does not do it. The flags weir does have (`-r -w -c -F -y -i -D -s -p -Q -B -O
//! -n -q -l -U --count --immediate-mode`) are real options of `weir filter`; these are parsed
//! (hidden from `--help`) only to be refused.

use clap::{ArgAction, Args};

/// What tcpdump's flag does, for the refusal (one row per flag, `(flag, meaning)`).
const MEANINGS: &[(&str, &str)] = &[
    ("-A", "each packet in ASCII"),
    ("-b", "AS numbers in ASDOT notation"),
    ("-C", "rotating the -w file by size"),
    ("-e", "the link-level header"),
    ("-E", "decrypting IPsec ESP"),
    ("-f", "foreign IPv4 addresses as numbers"),
    ("-G", "rotating the -w file by time"),
    ("-H", "802.11s draft mesh headers"),
    ("-I", "monitor mode"),
    ("-j", "the time stamp type"),
    ("-J", "listing the time stamp types"),
    ("-K", "no checksum verification"),
    ("-L", "listing the data link types"),
    ("-m", "SMI MIB modules"),
    ("-M", "a TCP-MD5 secret"),
    ("-N", "no domain names"),
    ("-#", "packet numbers"),
    ("-S", "absolute TCP sequence numbers"),
    ("-T", "packets read as the given protocol"),
    ("-t", "the timestamp format"),
    ("-u", "undecoded NFS handles"),
    ("-v", "verbose output"),
    ("-V", "a list of capture files"),
    ("-W", "a limit on rotated files"),
    ("-x", "each packet in hex"),
    ("-X", "each packet in hex and ASCII"),
    ("-z", "a command run on rotated files"),
    ("-Z", "dropping privileges"),
    ("--time-stamp-precision", "the time stamp precision"),
    ("--micro", "microsecond time stamps"),
    ("--nano", "nanosecond time stamps"),
    ("--print", "printing while writing with -w"),
];

/// The tcpdump flags `weir filter` accepts only to refuse them.
#[derive(Args, Debug, Default)]
pub struct RefusedFlags {
    #[arg(short = 'A', hide = true, action = ArgAction::Count)]
    ascii: u8,
    #[arg(short = 'b', hide = true, action = ArgAction::Count)]
    asdot: u8,
    #[arg(short = 'C', hide = true, value_name = "SIZE")]
    rotate_size: Option<String>,
    #[arg(short = 'e', hide = true, action = ArgAction::Count)]
    link_header: u8,
    #[arg(short = 'E', hide = true, value_name = "SECRET")]
    esp_secret: Option<String>,
    #[arg(short = 'f', hide = true, action = ArgAction::Count)]
    foreign: u8,
    #[arg(short = 'G', hide = true, value_name = "SECONDS")]
    rotate_seconds: Option<String>,
    #[arg(short = 'H', hide = true, action = ArgAction::Count)]
    mesh: u8,
    #[arg(short = 'I', hide = true, action = ArgAction::Count)]
    monitor: u8,
    #[arg(short = 'j', hide = true, value_name = "TYPE")]
    tstamp_type: Option<String>,
    #[arg(short = 'J', hide = true, action = ArgAction::Count)]
    list_tstamp_types: u8,
    #[arg(short = 'K', hide = true, action = ArgAction::Count)]
    no_checksum: u8,
    #[arg(short = 'L', hide = true, action = ArgAction::Count)]
    list_linktypes: u8,
    #[arg(short = 'm', hide = true, value_name = "MODULE")]
    mib: Option<String>,
    #[arg(short = 'M', hide = true, value_name = "SECRET")]
    md5_secret: Option<String>,
    #[arg(short = 'N', hide = true, action = ArgAction::Count)]
    no_domain: u8,
    #[arg(short = '#', hide = true, action = ArgAction::Count)]
    number: u8,
    #[arg(short = 'S', hide = true, action = ArgAction::Count)]
    absolute_seq: u8,
    #[arg(short = 'T', hide = true, value_name = "TYPE")]
    interpret_as: Option<String>,
    #[arg(short = 't', hide = true, action = ArgAction::Count)]
    timestamps: u8,
    #[arg(short = 'u', hide = true, action = ArgAction::Count)]
    nfs: u8,
    #[arg(short = 'v', hide = true, action = ArgAction::Count)]
    verbose: u8,
    #[arg(short = 'V', hide = true, value_name = "FILE")]
    file_list: Option<String>,
    #[arg(short = 'W', hide = true, value_name = "COUNT")]
    file_count: Option<String>,
    #[arg(short = 'x', hide = true, action = ArgAction::Count)]
    hex: u8,
    #[arg(short = 'X', hide = true, action = ArgAction::Count)]
    hex_ascii: u8,
    #[arg(short = 'z', hide = true, value_name = "COMMAND")]
    postrotate: Option<String>,
    #[arg(short = 'Z', hide = true, value_name = "USER")]
    user: Option<String>,
    #[arg(long = "time-stamp-precision", hide = true, value_name = "PRECISION")]
    precision: Option<String>,
    #[arg(long = "micro", hide = true)]
    micro: bool,
    #[arg(long = "nano", hide = true)]
    nano: bool,
    #[arg(long = "print", hide = true)]
    print: bool,
}

impl RefusedFlags {
    /// The first tcpdump flag given, in the order of [`MEANINGS`].
    fn first_given(&self) -> Option<&'static str> {
        let given = [
            ("-A", self.ascii > 0),
            ("-b", self.asdot > 0),
            ("-C", self.rotate_size.is_some()),
            ("-e", self.link_header > 0),
            ("-E", self.esp_secret.is_some()),
            ("-f", self.foreign > 0),
            ("-G", self.rotate_seconds.is_some()),
            ("-H", self.mesh > 0),
            ("-I", self.monitor > 0),
            ("-j", self.tstamp_type.is_some()),
            ("-J", self.list_tstamp_types > 0),
            ("-K", self.no_checksum > 0),
            ("-L", self.list_linktypes > 0),
            ("-m", self.mib.is_some()),
            ("-M", self.md5_secret.is_some()),
            ("-N", self.no_domain > 0),
            ("-#", self.number > 0),
            ("-S", self.absolute_seq > 0),
            ("-T", self.interpret_as.is_some()),
            ("-t", self.timestamps > 0),
            ("-u", self.nfs > 0),
            ("-v", self.verbose > 0),
            ("-V", self.file_list.is_some()),
            ("-W", self.file_count.is_some()),
            ("-x", self.hex > 0),
            ("-X", self.hex_ascii > 0),
            ("-z", self.postrotate.is_some()),
            ("-Z", self.user.is_some()),
            ("--time-stamp-precision", self.precision.is_some()),
            ("--micro", self.micro),
            ("--nano", self.nano),
            ("--print", self.print),
        ];
        given.iter().find(|(_, on)| *on).map(|(flag, _)| *flag)
    }

    /// An error naming the first tcpdump flag given, if any.
    pub fn refuse(&self) -> Result<(), String> {
        let Some(flag) = self.first_given() else { return Ok(()) };
        let meaning = MEANINGS.iter().find(|(f, _)| *f == flag).map_or("", |(_, m)| *m);
        Err(format!(
            "{flag} (in tcpdump: {meaning}) is not an option of weir filter, which prints \
             packets as tcpdump -q -n does (see weir filter --help)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Probe {
        #[command(flatten)]
        flags: RefusedFlags,
    }

    #[test]
    fn every_flag_has_a_meaning_and_is_refused_by_name() {
        for (flag, _) in MEANINGS {
            let mut argv = vec!["probe", flag];
            let takes_value = ["-C", "-E", "-G", "-j", "-m", "-M", "-T", "-V", "-W", "-z", "-Z"]
                .contains(flag)
                || *flag == "--time-stamp-precision";
            if takes_value {
                argv.push("x");
            }
            let probe = Probe::try_parse_from(&argv).unwrap_or_else(|e| panic!("{flag}: {e}"));
            let message = probe.flags.refuse().unwrap_err();
            assert!(message.starts_with(&format!("{flag} (in tcpdump: ")), "{message}");
        }
        assert!(Probe::try_parse_from(["probe"]).unwrap().flags.refuse().is_ok());
    }

    #[test]
    fn repeated_flags_count() {
        let probe = Probe::try_parse_from(["probe", "-vvv"]).unwrap();
        assert!(probe.flags.refuse().unwrap_err().starts_with("-v (in tcpdump: verbose output)"));
        let probe = Probe::try_parse_from(["probe", "-tttt"]).unwrap();
        assert!(probe.flags.refuse().unwrap_err().starts_with("-t (in tcpdump: "));
    }
}
