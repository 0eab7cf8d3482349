//! The elementwise program's scratch buffers, reused as values die.
use super::Val;

/// Scratch buffers handed out by reference count (uses still to come), so a value used
/// twice keeps its buffer and a dead one frees it for the next node.
#[derive(Default)]
pub(super) struct Slots {
    pub(super) refs: Vec<usize>,
    pub(super) free: Vec<usize>,
}

impl Slots {
    pub(super) fn alloc(&mut self, uses: usize) -> usize {
        let s = self.free.pop().unwrap_or_else(|| {
            self.refs.push(0);
            self.refs.len() - 1
        });
        self.refs[s] = uses;
        s
    }

    /// A node that passes an operand's buffer on (`where` with a constant condition).
    pub(super) fn hold(&mut self, v: Val, uses: usize) {
        if let Val::Slot(s) = v {
            self.refs[s] += uses;
        }
    }

    pub(super) fn release(&mut self, v: Val) {
        if let Val::Slot(s) = v {
            self.refs[s] = self.refs[s].saturating_sub(1);
            if self.refs[s] == 0 {
                self.free.push(s);
            }
        }
    }
}
