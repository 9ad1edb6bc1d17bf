//! `weir run --cpus N`: N worker threads, each with its own loaded program (worker `i`
//! is CPU `i`: its own copy of every per-CPU map; the other maps are shared, as the
//! kernel's are between CPUs).
//!
//! Packets go to workers by a **flow hash** (`weir::flow_hash`, also what
//! `bpf_get_hash_recalc` returns), as a NIC's receive-side scaling spreads them over CPUs:
//! every packet of a flow (the IPv4/IPv6 addresses, protocol and TCP/UDP/SCTP ports; for
//! other frames, the Ethernet addresses) goes to the same worker, so a program
//! that keeps per-flow state in a per-CPU map sees the whole flow, in order, as it would
//! behind RSS. The hash is symmetric (both directions of a connection go to one worker,
//! what symmetric RSS is configured for). Round-robin would balance better but splits
//! every flow over all workers.
//!
//! The reader (the calling thread) reads a batch of packets, hands each worker its share,
//! waits for all of them, and gives the verdicts back in record order, so `--verdicts`
//! lines and `-w` output are in record order whatever the worker count.

use std::sync::mpsc;

use weir::{Engine, Object, Verdict};

/// Packets read per batch (each worker gets its share of them).
const BATCH: usize = 2048;

/// What the workers said when they loaded the program.
pub struct Ready {
    /// `--explain`'s line (worker 0's engine choice).
    pub choice: String,
}

/// Which of `workers` workers takes `frame`: by [`weir::flow_hash`], the hash
/// `bpf_get_hash_recalc` returns (symmetric flow keys).
pub fn flow_worker(frame: &[u8], workers: usize) -> usize {
    if workers <= 1 {
        return 0;
    }
    weir::flow_hash(frame) as usize % workers
}

/// What the workers run: program `entry` on `engine` (or the chosen one), `cpus` workers;
/// `keep_packets`: whether verdicts carry the packet out (for `-w`).
#[derive(Clone, Copy)]
pub struct Plan {
    pub entry: usize,
    pub engine: Option<Engine>,
    pub cpus: usize,
    pub keep_packets: bool,
    /// Run the programs with their proofs (the object was verified; see
    /// `weir::Object::load_with`).
    pub proven: bool,
}

/// One packet's place in its batch and its bytes.
type Job = (usize, Vec<u8>);

/// A worker's answer for its share of a batch: the verdicts, or the first trap (place in
/// the batch, the trap).
type Answer = Result<Vec<(usize, Verdict)>, (usize, String)>;

/// Runs `plan` over the frames `next` gives
/// (`None`: the end; each with the record index, for errors, and what `done` needs),
/// calling `loaded` once the workers have loaded the program and `done` with each
/// frame's verdict, in record order. A trap ends the run with the error of the first
/// trapped record, after the verdicts of the records before it (packets of other workers
/// later in the same batch have run, and their map updates stay).
pub fn run<M>(
    object: &Object,
    plan: &Plan,
    mut next: impl FnMut() -> Result<Option<(Vec<u8>, u64, M)>, String>,
    mut loaded: impl FnMut(&Ready) -> Result<(), String>,
    mut done: impl FnMut(M, Verdict) -> Result<(), String>,
) -> Result<(), String> {
    let Plan { entry, engine, cpus, keep_packets, proven } = *plan;
    std::thread::scope(|scope| {
        let (results_tx, results) = mpsc::channel::<Answer>();
        let (hello_tx, hello) = mpsc::channel::<Result<Ready, String>>();
        let mut senders = Vec::new();
        for cpu in 0..cpus {
            let (tx, rx) = mpsc::channel::<Vec<Job>>();
            senders.push(tx);
            let results_tx = results_tx.clone();
            let hello_tx = hello_tx.clone();
            scope.spawn(move || {
                let mut program = match object.load_with(entry, engine, cpu, proven) {
                    Ok(mut p) => {
                        p.keep_packets(keep_packets);
                        let choice = p.explain();
                        let _ = hello_tx.send(Ok(Ready { choice }));
                        p
                    }
                    Err(e) => {
                        let _ = hello_tx.send(Err(format!("worker {cpu}: {e}")));
                        return;
                    }
                };
                for batch in rx {
                    let mut out = Vec::with_capacity(batch.len());
                    let mut msg = Ok(());
                    for (pos, data) in batch {
                        match program.run(&data) {
                            Ok(v) => out.push((pos, v)),
                            Err(t) => {
                                msg = Err((pos, t.to_string()));
                                break;
                            }
                        }
                    }
                    let msg = msg.map(|()| out);
                    if results_tx.send(msg).is_err() {
                        return;
                    }
                }
            });
        }
        drop((results_tx, hello_tx));
        for i in 0..cpus {
            let l = hello.recv().map_err(|_| "a worker ended before loading".to_string())??;
            if i == 0 {
                loaded(&l)?;
            }
        }
        let mut frames: Vec<(Vec<u8>, u64, M)> = Vec::with_capacity(BATCH);
        loop {
            while frames.len() < BATCH {
                match next()? {
                    Some(f) => frames.push(f),
                    None => break,
                }
            }
            if frames.is_empty() {
                break;
            }
            let mut shares: Vec<Vec<Job>> = (0..cpus).map(|_| Vec::new()).collect();
            for (pos, (data, _, _)) in frames.iter_mut().enumerate() {
                let w = flow_worker(data, cpus);
                shares[w].push((pos, std::mem::take(data)));
            }
            let mut busy = 0;
            for (share, tx) in shares.into_iter().zip(&senders) {
                if !share.is_empty() {
                    tx.send(share).map_err(|_| "a worker ended early".to_string())?;
                    busy += 1;
                }
            }
            let mut verdicts: Vec<Option<Verdict>> = (0..frames.len()).map(|_| None).collect();
            let mut trap: Option<(usize, String)> = None;
            for _ in 0..busy {
                match results.recv().map_err(|_| "a worker ended early".to_string())? {
                    Ok(out) => {
                        for (pos, v) in out {
                            verdicts[pos] = Some(v);
                        }
                    }
                    Err((pos, t)) => {
                        if trap.as_ref().is_none_or(|(p, _)| pos < *p) {
                            trap = Some((pos, t));
                        }
                    }
                }
            }
            // Record order, up to the first trapped record.
            for (pos, ((_, index, meta), v)) in frames.drain(..).zip(verdicts).enumerate() {
                if let Some((tpos, t)) = &trap {
                    if pos == *tpos {
                        return Err(format!("packet {index}: the program trapped: {t}"));
                    }
                }
                // (None: after a trapped packet in the same worker's share.)
                if let Some(v) = v {
                    done(meta, v)?;
                }
            }
        }
        Ok(())
    })
}
