//! Live capture for `weir filter` without `-r` (`-i IFACE`, or the default interface) and
//! `weir filter -D`. [`Live::open`] opens the interface, compiles the filter for its link
//! type (known only once it is open) and puts the filter where it is cheapest: in the
//! kernel as classic BPF (`weir::emit::cbpf`), else as an eBPF socket filter
//! (`weir::emit::ebpf`, loaded through the kernel's verifier), else in user space on the
//! engine the facade picks. `--engine` forces user space on that engine. `--explain` says
//! which, and why the others did not fit. The packets then go through `weir filter`'s one
//! packet loop (lines, `--count`, `-w`, `-c`), which stops at Ctrl-C (SIGINT, SIGTERM,
//! SIGHUP; a second one ends the process at once); tcpdump's three statistics lines close
//! the run ([`Live::print_statistics`]). A signal the process was started ignoring stays
//! ignored (`weir_sys::cleanup`'s rule): a background job of a non-interactive shell
//! ignores SIGINT, so stop it with SIGTERM.

use std::process::ExitCode;

use clap::Args;
use weir::{Engine, Filter, LinkType, PreparedFilter, ProgType};
use weir_runtime::live::{self, Direction, LiveOptions, LiveSource};
use weir_runtime::source::PacketSource;

/// tcpdump's live-capture options.
#[derive(Args, Debug, Clone, Default)]
pub struct LiveArgs {
    /// Capture on this interface (`any` for all of them).
    #[arg(short = 'i', long = "interface", value_name = "INTERFACE")]
    pub interface: Option<String>,
    /// Keep this many bytes of each packet (0: 262144).
    #[arg(short = 's', long = "snapshot-length", value_name = "SNAPLEN")]
    pub snaplen: Option<u32>,
    /// Do not put the interface in promiscuous mode.
    #[arg(short = 'p', long = "no-promiscuous-mode")]
    pub no_promisc: bool,
    /// Which packets: in, out or inout.
    #[arg(short = 'Q', long = "direction", value_name = "DIRECTION")]
    pub direction: Option<String>,
    /// The capture buffer, in KiB (default 2048).
    #[arg(short = 'B', long = "buffer-size", value_name = "KIB")]
    pub buffer_kib: Option<usize>,
    /// Hand packets over as they arrive instead of in batches of up to one second.
    #[arg(long = "immediate-mode")]
    pub immediate: bool,
}

impl LiveArgs {
    fn options(&self, interface: &str) -> Result<LiveOptions, String> {
        let mut options = LiveOptions::new(interface);
        if let Some(snaplen) = self.snaplen {
            options.snaplen = snaplen;
        }
        options.promisc = !self.no_promisc;
        if let Some(direction) = &self.direction {
            options.direction = direction.parse::<Direction>()?;
        }
        if let Some(kib) = self.buffer_kib {
            if kib == 0 {
                return Err("-B takes a size in KiB above 0".to_string());
            }
            options.buffer_size = kib.saturating_mul(1024);
        }
        if self.immediate {
            options.timeout_ms = 1;
        }
        Ok(options)
    }
}

/// Where the filter runs.
pub enum Placement {
    /// In the kernel: every packet that reaches the ring matches.
    Kernel,
    /// In user space on the facade's engine.
    User(PreparedFilter),
}

impl Placement {
    /// Whether a packet that reached the ring matches.
    pub fn matches(&mut self, data: &[u8], wire_len: u32) -> bool {
        match self {
            Placement::Kernel => true,
            Placement::User(prepared) => prepared.matches(data, wire_len),
        }
    }
}

/// Puts `filter` in the kernel if it fits there, else prepares it for user space. The
/// lines say what happened (for `--explain`).
fn place(
    source: &mut LiveSource,
    filter: &Filter,
    engine: Option<Engine>,
    lines: &mut Vec<String>,
) -> Result<Placement, String> {
    if engine.is_none() {
        let classic = weir::emit::cbpf::emit(filter).map_err(|e| e.to_string()).and_then(|insns| {
            let raw: Vec<(u16, u8, u8, u32)> =
                weir::isa::cbpf::encode(&insns).iter().map(|r| (r.code, r.jt, r.jf, r.k)).collect();
            source.attach_classic(&raw).map(|()| raw.len()).map_err(|e| e.to_string())
        });
        match classic {
            Ok(n) => {
                lines.push(format!("kernel filter: classic BPF, {n} instructions"));
                return Ok(Placement::Kernel);
            }
            Err(e) => lines.push(format!("not classic BPF in the kernel: {e}")),
        }
        let ebpf = weir::emit::ebpf::emit(filter, ProgType::SocketFilter)
            .map_err(|e| e.to_string())
            .and_then(|program| {
                let code = program.to_bytes();
                source.attach_ebpf_code(&code).map(|()| code.len() / 8).map_err(|e| e.to_string())
            });
        match ebpf {
            Ok(n) => {
                lines.push(format!("kernel filter: eBPF socket filter, {n} instructions"));
                return Ok(Placement::Kernel);
            }
            Err(e) => lines.push(format!("not an eBPF socket filter in the kernel: {e}")),
        }
    } else {
        lines.push("no kernel filter: --engine runs the filter in user space".to_string());
    }
    let prepared = crate::filter::prepare(filter, engine)?;
    lines.push(format!("matching in user space: {}", prepared.choice().to_string().trim_end()));
    Ok(Placement::User(prepared))
}

/// tcpdump's closing lines: "N packets captured" and so on ("1 packet").
pub fn statistics_lines(captured: u64, received: u64, dropped: u64) -> String {
    let plural = |n: u64| if n == 1 { "" } else { "s" };
    format!(
        "{captured} packet{} captured\n{received} packet{} received by filter\n\
         {dropped} packet{} dropped by kernel\n",
        plural(captured),
        plural(received),
        plural(dropped)
    )
}

/// An open interface with its filter placed.
pub struct Live {
    pub source: LiveSource,
    pub interface: String,
    /// The link type the filter was compiled for.
    pub linktype: LinkType,
    pub placement: Placement,
    /// Keeps the signal handler's stop flag installed while the capture runs.
    _signals: live::StopGuard,
}

impl Live {
    /// Opens `args.interface` (the default interface when none is named: the first one
    /// that is up and not a loopback, as libpcap picks it, else `any`), compiles the filter
    /// for its link type with `compile` and places it (see the module documentation).
    pub fn open(
        args: &LiveArgs,
        compile: &mut dyn FnMut(LinkType) -> Result<Filter, String>,
        engine: Option<Engine>,
        explain: bool,
    ) -> Result<Live, String> {
        let interface = match &args.interface {
            Some(name) => name.clone(),
            None => live::default_interface().map_err(|e| e.to_string())?,
        };
        let options = args.options(&interface)?;
        let mut source = LiveSource::open(&options).map_err(|e| e.to_string())?;
        let number = source.linktype();
        let linktype = LinkType::from_number(number)
            .filter(|&link| weir::pflang::compiles_for(link))
            .ok_or_else(|| {
                format!("{interface}: link type {number} is not one weir compiles filters for")
            })?;
        let filter = compile(linktype)?;
        let mut lines = Vec::new();
        let placement = place(&mut source, &filter, engine, &mut lines)?;
        if explain {
            for line in &lines {
                eprintln!("weir: {interface}: {line}");
            }
        }
        let signals = source.stop_on_signals().map_err(|e| format!("signals: {e}"))?;
        Ok(Live { source, interface, linktype, placement, _signals: signals })
    }

    /// tcpdump's first line on standard error.
    pub fn listening(&self) {
        eprintln!(
            "weir: listening on {}, link-type {}, snapshot length {} bytes",
            self.interface,
            self.linktype.name(),
            self.source.snaplen()
        );
    }

    /// tcpdump's three closing lines, for `captured` packets that matched.
    pub fn print_statistics(&mut self, captured: u64) -> Result<(), String> {
        let stats = self.source.stats().map_err(|e| e.to_string())?;
        eprint!("{}", statistics_lines(captured, stats.received, stats.dropped));
        Ok(())
    }
}

/// `-D`: the interfaces weir can capture on, numbered as tcpdump numbers them.
pub fn list_interfaces() -> Result<ExitCode, String> {
    for line in live::interface_lines().map_err(|e| e.to_string())? {
        crate::out::line(&line)?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_read_as_tcpdumps() {
        assert_eq!(
            statistics_lines(1, 2, 0),
            "1 packet captured\n2 packets received by filter\n0 packets dropped by kernel\n"
        );
        assert_eq!(
            statistics_lines(0, 1, 1),
            "0 packets captured\n1 packet received by filter\n1 packet dropped by kernel\n"
        );
    }

    #[test]
    fn options_follow_tcpdumps_flags() {
        let args = LiveArgs {
            snaplen: Some(96),
            no_promisc: true,
            direction: Some("in".into()),
            buffer_kib: Some(4096),
            immediate: true,
            ..LiveArgs::default()
        };
        let options = args.options("eth0").unwrap();
        assert_eq!(options.snaplen, 96);
        assert!(!options.promisc);
        assert_eq!(options.direction, Direction::In);
        assert_eq!(options.buffer_size, 4 << 20);
        assert_eq!(options.timeout_ms, 1);
        let bad = LiveArgs { direction: Some("up".into()), ..LiveArgs::default() };
        assert!(bad.options("eth0").unwrap_err().contains("in, out or inout"));
        let zero = LiveArgs { buffer_kib: Some(0), ..LiveArgs::default() };
        assert!(zero.options("eth0").is_err());
    }
}
