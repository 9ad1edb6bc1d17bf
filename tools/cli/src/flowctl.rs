//! The control socket of `weir flow run --control`: a Unix stream socket, one request per
//! connection, as `ovs-appctl` talks to `ovs-vswitchd` through its `.ctl` socket.
//!
//! A request is one line: `stats`, `add RULE` (tc's arguments after `tc filter add dev D
//! ingress`) or `del SELECTOR` (`line N`, or tc's `[chain C] [prio P] [protocol X]
//! [handle H]`). The answer is the output's lines, then `ok`, or `error MESSAGE`.
//! Requests are answered by a thread beside the packet loop, one at a time; the classifier
//! publishes each change without stopping the loop.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir::flow::control::{Selector, Table};
use weir::flow::Classifier;

/// Where `--control` listens without a path, as OVS keeps `ovs-vswitchd.ctl` under its
/// run directory.
pub const DEFAULT_SOCKET: &str = "/run/weir/flow.ctl";

/// A request's longest line (a rule is one line).
const MAX_REQUEST: u64 = 64 * 1024;

/// How long a client may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// A bound control socket; the file is removed when it is dropped.
pub struct Server {
    path: PathBuf,
    listener: UnixListener,
}

impl Server {
    /// Bind `path` (its directory created if missing). A socket file left by a run that
    /// ended is replaced; one a running datapath answers on is refused.
    pub fn bind(path: &Path) -> Result<Server, String> {
        let name = path.display();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if !meta.file_type().is_socket() {
                return Err(format!("{name}: exists and is not a socket"));
            }
            if UnixStream::connect(path).is_ok() {
                return Err(format!("{name}: another datapath is served on this socket"));
            }
            std::fs::remove_file(path).map_err(|e| format!("{name}: {e}"))?;
        }
        let listener = UnixListener::bind(path).map_err(|e| format!("{name}: {e}"))?;
        Ok(Server { path: path.to_path_buf(), listener })
    }

    /// Answer requests on `classifier` and its `table` on a thread of their own, until
    /// the [`Serving`] is dropped.
    pub fn serve(self, classifier: Arc<Classifier>, table: Arc<Mutex<Table>>) -> Serving {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let path = self.path.clone();
        // Detached, not scoped: if the socket file is taken away, nothing can wake its
        // accept, and the process must still end.
        let thread = std::thread::spawn(move || {
            for stream in self.listener.incoming() {
                if flag.load(Ordering::Relaxed) {
                    break;
                }
                match stream {
                    // A client that goes away mid-answer costs only its answer.
                    Ok(stream) => drop(answer(stream, &classifier, &table)),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        eprintln!("weir: {}: {e}; control socket closed", self.path.display());
                        break;
                    }
                }
            }
            drop(self);
        });
        Serving { stop, path, thread: Some(thread) }
    }
}

/// The thread answering on a control socket; dropped, it stops: woken by a connection
/// of ours, it ends (after the request it is answering, if any) and removes the socket
/// file.
pub struct Serving {
    stop: Arc<AtomicBool>,
    path: PathBuf,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if UnixStream::connect(&self.path).is_ok() {
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        } else {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn answer(
    stream: UnixStream,
    classifier: &Classifier,
    table: &Mutex<Table>,
) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    let mut line = String::new();
    BufReader::new((&stream).take(MAX_REQUEST)).read_line(&mut line)?;
    let reply = match execute(line.trim(), classifier, table) {
        Ok(text) => format!("{text}ok\n"),
        Err(e) => format!("error {}\n", e.replace('\n', " ")),
    };
    (&stream).write_all(reply.as_bytes())
}

/// One request: the answer's lines, or the error.
pub fn execute(
    request: &str,
    classifier: &Classifier,
    table: &Mutex<Table>,
) -> Result<String, String> {
    let mut table = match table.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    let (verb, rest) = request.split_once(' ').unwrap_or((request, ""));
    match verb {
        "stats" if rest.is_empty() => {
            Ok(table.rows(classifier).iter().map(|r| format!("{r}\n")).collect())
        }
        "add" => {
            let e = table.add(classifier, rest)?;
            Ok(format!(
                "added line {} prio {} chain {} handle 0x{:x}\n",
                e.line, e.prio, e.chain, e.handle
            ))
        }
        "del" => {
            let words: Vec<&str> = rest.split_whitespace().collect();
            let n = table.delete(classifier, &Selector::parse(&words)?)?;
            Ok(format!("deleted {n}\n"))
        }
        _ => Err(format!("unknown request \"{request}\" (stats, add RULE, del SELECTOR)")),
    }
}

/// Send one request to the datapath on `path`: its output, or `Err((message, exit
/// code))`: 1 when it refused the request, 2 when it could not be reached.
pub fn request(path: &Path, request: &str) -> Result<String, (String, u8)> {
    let name = path.display();
    let unreachable = |e: std::io::Error| {
        (format!("{name}: {e} (is `weir flow run --control {name}` running?)"), 2)
    };
    let mut stream = UnixStream::connect(path).map_err(unreachable)?;
    stream.write_all(format!("{request}\n").as_bytes()).map_err(unreachable)?;
    stream.shutdown(std::net::Shutdown::Write).map_err(unreachable)?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).map_err(unreachable)?;
    let mut lines: Vec<&str> = reply.lines().collect();
    match lines.pop() {
        Some("ok") => Ok(lines.iter().map(|l| format!("{l}\n")).collect()),
        Some(l) if l.starts_with("error ") => Err((l["error ".len()..].to_string(), 1)),
        _ => Err((format!("{name}: the datapath's answer ended early"), 2)),
    }
}
