//! `BPF_MAP_TYPE_QUEUE` and `BPF_MAP_TYPE_STACK`: no keys; push, pop and peek copy values
//! in and out (the kernel's `bpf_map_peek_elem` copies too: no value stays in place).

use std::collections::VecDeque;
use std::sync::Mutex;

use crate::{MapError, BPF_EXIST, BPF_NOEXIST};

#[derive(Debug)]
pub(crate) struct QueueStack {
    /// Oldest first.
    items: Mutex<VecDeque<Box<[u8]>>>,
    stack: bool,
    value_size: usize,
    max_entries: usize,
}

impl QueueStack {
    pub(crate) fn new(stack: bool, value_size: u32, max_entries: u32) -> QueueStack {
        QueueStack {
            items: Mutex::new(VecDeque::new()),
            stack,
            value_size: value_size as usize,
            max_entries: max_entries as usize,
        }
    }

    fn items(&self) -> std::sync::MutexGuard<'_, VecDeque<Box<[u8]>>> {
        self.items.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `queue_stack_map_push_elem`: `BPF_NOEXIST` or unknown flags are EINVAL; on a full
    /// map, `BPF_EXIST` drops the oldest value (queue and stack alike), else E2BIG.
    pub(crate) fn push(&self, value: &[u8], flags: u64) -> Result<(), MapError> {
        if value.len() != self.value_size || flags & BPF_NOEXIST != 0 || flags > BPF_EXIST {
            return Err(MapError::Invalid);
        }
        let mut items = self.items();
        if items.len() >= self.max_entries {
            if flags & BPF_EXIST == 0 {
                return Err(MapError::TooBig);
            }
            items.pop_front();
        }
        items.push_back(value.into());
        Ok(())
    }

    /// The next value out (the oldest of a queue, the newest of a stack), or ENOENT.
    pub(crate) fn pop(&self) -> Result<Vec<u8>, MapError> {
        let mut items = self.items();
        let v = if self.stack { items.pop_back() } else { items.pop_front() };
        v.map(Vec::from).ok_or(MapError::NoEntry)
    }

    pub(crate) fn peek(&self) -> Result<Vec<u8>, MapError> {
        let items = self.items();
        let v = if self.stack { items.back() } else { items.front() };
        v.map(|v| v.to_vec()).ok_or(MapError::NoEntry)
    }

    pub(crate) fn len(&self) -> usize {
        self.items().len()
    }
}
