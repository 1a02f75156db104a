//! Input spliced on to another connection ([`Io::splice_to`](super::io::Io::splice_to)):
//! which connection feeds which, and through which pipe. The driver moves the bytes:
//! read into the pipe and written from it with splice(2), never copied to user memory
//! nor handed to the protocol; the pipe is emptied before more is read, so what it
//! holds (at most one read) is all a splice adds.

use std::collections::HashMap;

use super::slab::Token;
use crate::sys::Pipe;

/// Bytes moved into the pipe per read: a pipe's default capacity (16 pages).
pub(crate) const PIPE_CHUNK: usize = 64 * 1024;

/// One connection's input on its way to another.
#[derive(Debug)]
pub(crate) struct Splice {
    pub(crate) to: Token,
    pub(crate) pipe: Pipe,
    /// Bytes in the pipe, not yet taken by `to`.
    pub(crate) in_pipe: usize,
    /// Bytes still to move into the pipe; `None`: until the input ends.
    pub(crate) left: Option<u64>,
}

impl Splice {
    /// Bytes to move into the pipe by the next read.
    pub(crate) fn chunk(&self) -> usize {
        self.left
            .map_or(PIPE_CHUNK, |left| usize::try_from(left).map_or(PIPE_CHUNK, |left| left.min(PIPE_CHUNK)))
    }

    /// `n` bytes were moved into the pipe.
    pub(crate) fn filled(&mut self, n: usize) {
        self.in_pipe = n;
        if let Some(left) = &mut self.left {
            *left -= n as u64;
        }
    }

    /// Whether every byte it was to move has reached `to`.
    pub(crate) fn is_done(&self) -> bool {
        self.in_pipe == 0 && self.left == Some(0)
    }
}

/// The loop's splices, by the connection whose input they take, and who feeds whom.
#[derive(Debug, Default)]
pub(crate) struct Splices {
    by_source: HashMap<Token, Splice>,
    source_of: HashMap<Token, Token>,
}

impl Splices {
    pub(crate) fn is_empty(&self) -> bool {
        self.by_source.is_empty()
    }

    /// Whether `from` may start feeding `to`: one splice takes a connection's input,
    /// and one feeds a connection, at most.
    pub(crate) fn may_start(&self, from: Token, to: Token) -> bool {
        from != to && !self.by_source.contains_key(&from) && !self.source_of.contains_key(&to)
    }

    /// `from`'s input goes to `to` through `pipe` from now on, `left` bytes of it
    /// (`None`: until it ends).
    pub(crate) fn start(&mut self, from: Token, to: Token, pipe: Pipe, left: Option<u64>) {
        self.by_source.insert(from, Splice { to, pipe, in_pipe: 0, left });
        self.source_of.insert(to, from);
    }

    /// `from`'s splice moved all it was to: its input reaches its protocol again.
    pub(crate) fn finish(&mut self, from: Token) {
        if let Some(splice) = self.by_source.remove(&from) {
            self.source_of.remove(&splice.to);
        }
    }

    /// The splice that takes `from`'s input.
    pub(crate) fn of(&mut self, from: Token) -> Option<&mut Splice> {
        self.by_source.get_mut(&from)
    }

    /// Forgets the splices of a connection that closed: its own (its pipe closes),
    /// and the one feeding it, whose source is returned: its input reaches its
    /// protocol again.
    pub(crate) fn end(&mut self, token: Token) -> Option<Token> {
        self.finish(token);
        let source = self.source_of.remove(&token)?;
        self.by_source.remove(&source);
        Some(source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Token = Token(1);
    const B: Token = Token(2);
    const C: Token = Token(3);

    #[test]
    fn one_splice_takes_a_connections_input_and_one_feeds_a_connection() {
        let mut splices = Splices::default();
        assert!(splices.is_empty());
        assert!(!splices.may_start(A, A), "into itself");
        assert!(splices.may_start(A, B));
        splices.start(A, B, Pipe::new().expect("a pipe"), None);
        assert!(!splices.is_empty());
        assert_eq!(splices.of(A).map(|splice| splice.to), Some(B));
        assert!(splices.of(B).is_none());
        assert!(!splices.may_start(A, C), "A's input is taken");
        assert!(!splices.may_start(C, B), "B is fed");
        assert!(splices.may_start(B, A), "the other way");
        assert!(splices.may_start(C, A));
    }

    #[test]
    fn a_closed_connections_splices_end_and_the_one_that_fed_it_is_named() {
        let mut splices = Splices::default();
        splices.start(A, B, Pipe::new().expect("a pipe"), None);
        splices.start(B, A, Pipe::new().expect("a pipe"), None);
        // B closes: its own splice ends, and A, which fed it, gets its input back.
        assert_eq!(splices.end(B), Some(A));
        assert!(splices.is_empty());
        assert!(splices.may_start(A, C) && splices.may_start(C, B));
        assert_eq!(splices.end(A), None);
    }
}
