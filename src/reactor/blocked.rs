//! Writers whose reading stopped for another connection's output: a connection that
//! wrote to (or spliced into) one whose unsent output went over the budget reads no
//! more until that output drains (HAProxy's full channel and its room-ready wake).

use super::slab::Token;

/// Each blocked writer, with the connection it waits for.
#[derive(Debug, Default)]
pub(crate) struct Blocked {
    /// (the connection waited for, the writer).
    pairs: Vec<(Token, Token)>,
}

impl Blocked {
    /// `writer` waits for `on`'s output to drain.
    pub(crate) fn add(&mut self, on: Token, writer: Token) {
        self.pairs.push((on, writer));
    }

    /// Forgets every writer waiting for `on`, calling `each` with it.
    pub(crate) fn release(&mut self, on: Token, mut each: impl FnMut(Token)) {
        let mut i = 0;
        while i < self.pairs.len() {
            let (waited_for, writer) = self.pairs[i];
            if waited_for == on {
                self.pairs.swap_remove(i);
                each(writer);
            } else {
                i += 1;
            }
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_writers_waiting_for_a_connection_are_released_each_once() {
        let mut blocked = Blocked::default();
        let (a, b, w1, w2, w3) = (Token(1), Token(2), Token(10), Token(11), Token(12));
        blocked.add(a, w1);
        blocked.add(b, w2);
        blocked.add(a, w3);
        let mut released = Vec::new();
        blocked.release(a, |writer| released.push(writer));
        released.sort_by_key(|token| token.0);
        assert_eq!(released, [w1, w3]);
        blocked.release(a, |writer| panic!("{writer:?} released twice"));
        blocked.release(b, |writer| released.push(writer));
        assert_eq!(released.last(), Some(&w2));
        assert!(blocked.is_empty());
    }
}
