//! A veth pair in a network namespace of its own, for the tests that send frames through
//! the kernel (live capture, the flow datapath's nftables oracle): `va` and `vb`, both up,
//! IPv6 off (so that no router solicitation lands among the test's frames), loopback up.
//! The namespace is deleted when the lab is dropped.

use std::process::{Command, Output};

/// The namespace and its veth pair `va` <-> `vb`.
pub struct VethLab {
    ns: String,
}

impl VethLab {
    /// Makes the lab, or prints `SKIPPED: <test>: <reason>` and gives `None` when it cannot
    /// be made here: not root, `ip` or one of `tools` missing, or an `ip` step refused.
    pub fn new(test: &str, tools: &[&str]) -> Option<VethLab> {
        let uid = Command::new("id").arg("-u").output().ok()?;
        if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
            println!("SKIPPED: {test}: needs root (network namespaces, packet sockets)");
            return None;
        }
        for tool in std::iter::once(&"ip").chain(tools) {
            let found = ["-V", "--version"]
                .iter()
                .any(|flag| Command::new(tool).arg(flag).output().is_ok());
            if !found {
                println!("SKIPPED: {test}: {tool} is not installed");
                return None;
            }
        }
        // Namespace names are kept short; the pid keeps concurrent runs apart, so it comes
        // before the test's name, which is what a cut drops (a long name cut after it once
        // put two runs in one namespace, where each saw the other's frames and waited).
        let ns: String = format!("weir-{}-{test}", std::process::id()).chars().take(40).collect();
        let lab = VethLab { ns };
        let steps: [&[&str]; 6] = [
            &["netns", "add", &lab.ns],
            &["-n", &lab.ns, "link", "add", "va", "type", "veth", "peer", "name", "vb"],
            &["-n", &lab.ns, "link", "set", "va", "up"],
            &["-n", &lab.ns, "link", "set", "vb", "up"],
            &["-n", &lab.ns, "link", "set", "lo", "up"],
            &["netns", "exec", &lab.ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"],
        ];
        for step in steps {
            let out = Command::new("ip").args(step).output().ok()?;
            if !out.status.success() {
                println!(
                    "SKIPPED: {test}: ip {}: {}",
                    step.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                );
                return None;
            }
        }
        Some(lab)
    }

    /// The namespace's name.
    pub fn ns(&self) -> &str {
        &self.ns
    }

    /// `program` to run inside the namespace (arguments still to add).
    pub fn command(&self, program: &str) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.ns, program]);
        command
    }

    /// Runs `program args` inside the namespace to its end, at most 60 s (`timeout`).
    pub fn run(&self, program: &str, args: &[&str]) -> Output {
        Command::new("timeout")
            .args(["60", "ip", "netns", "exec", &self.ns, program])
            .args(args)
            .output()
            .expect("ip netns exec runs")
    }
}

impl Drop for VethLab {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).output();
    }
}
