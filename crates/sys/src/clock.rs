//! The calling thread's CPU time, which std does not read: on a loaded machine a timing
//! by it leaves out the time the thread spent preempted, most of the wall clock's noise.

use std::time::Duration;

/// This thread's CPU time (user + system) so far (`CLOCK_THREAD_CPUTIME_ID`); zero if the
/// clock cannot be read.
pub fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a live timespec that clock_gettime fills; the clock id is a constant
    // Linux defines.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0;
    if !ok {
        return Duration::ZERO;
    }
    Duration::new(u64::try_from(ts.tv_sec).unwrap_or(0), u32::try_from(ts.tv_nsec).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_this_threads_work_not_its_sleep() {
        let start = thread_cpu();
        std::thread::sleep(Duration::from_millis(30));
        let slept = thread_cpu() - start;
        let start = thread_cpu();
        let mut x = 0u64;
        let wall = std::time::Instant::now();
        while wall.elapsed() < Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let worked = thread_cpu() - start;
        assert!(slept < Duration::from_millis(10), "a sleep counted {slept:?}");
        assert!(worked > Duration::ZERO, "30 ms of spinning counted nothing");
        assert!(worked > slept, "spinning {worked:?} not above sleeping {slept:?}");
    }
}
