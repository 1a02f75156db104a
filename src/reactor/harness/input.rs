//! What a connection of the [`Harness`] receives: held, handed in and read by the
//! loop's rules (see [Input](Harness#input)).

use super::{Harness, Status};
use crate::reactor::slab::Token;
use crate::reactor::{ConnId, Protocol, Then, Verdict};

impl<P: Protocol> Harness<P> {
    /// Hands `input` to the harness's own connection as one read, after what it
    /// holds, as the loop does (see [Input](Harness#input)). Returns the verdict of
    /// the last `on_data` call made, or `None` when none was: the connection is
    /// paused, closing, or being opened.
    pub fn receive(&mut self, input: &[u8]) -> Option<Verdict> {
        self.receive_on(self.id(), input)
    }

    /// Hands `input` to connection `id` as one read, as [`receive`](Harness::receive)
    /// does. A connection being opened reads it once established; a closing or
    /// closed one drops it.
    pub fn receive_on(&mut self, id: ConnId, input: &[u8]) -> Option<Verdict> {
        let entry = self.entry(id).expect("a connection of this harness");
        if entry.closing || matches!(entry.status, Status::Closed(_)) {
            return None;
        }
        entry.unread.extend_from_slice(input);
        self.read(id.token())
    }

    /// What connection `id` holds of what it [received](Harness::receive_on): the
    /// bytes its protocol left unconsumed, which the loop would hand to
    /// [`Protocol::on_close`] if it closed now.
    pub fn unconsumed(&self, id: ConnId) -> &[u8] {
        &self.entry_ref(id).held
    }

    /// Whether a callback of connection `id` said close ([`Then::Close`],
    /// [`Flow::Close`](crate::reactor::Flow::Close)): it reads no more, and the loop
    /// would close it once its output is sent.
    pub fn is_closing(&self, id: ConnId) -> bool {
        self.entry_ref(id).closing
    }

    /// Reads what connection `token` received, as the loop does when it serves it:
    /// a paused protocol whose output is taken goes on first with what it holds;
    /// then what waits unread is handed in after it. Returns the last verdict.
    pub(super) fn read(&mut self, token: Token) -> Option<Verdict> {
        let mut last = None;
        loop {
            let Some(entry) = self.entry(ConnId::of(token)) else { return last };
            if entry.closing || matches!(entry.status, Status::Closed(_)) {
                entry.unread = Vec::new();
                return last;
            }
            if entry.status != Status::Open {
                return last;
            }
            if entry.paused {
                if !entry.collected.is_empty() || entry.awaiting_output {
                    // Goes on once its output is taken, or a callback writes or resumes.
                    return last;
                }
                entry.paused = false;
                if !entry.held.is_empty() {
                    // What was received comes before what waits unread.
                    last = Some(self.answer(token, &[]));
                    continue;
                }
            }
            if entry.unread.is_empty() {
                return last;
            }
            let fresh = std::mem::take(&mut entry.unread);
            last = Some(self.answer(token, &fresh));
        }
    }

    /// Calls `on_data` with what connection `token` holds and then `fresh`, and keeps
    /// what the protocol leaves unconsumed.
    fn answer(&mut self, token: Token, fresh: &[u8]) -> Verdict {
        let entry = self.entry(ConnId::of(token)).expect("a connection of this harness");
        let mut input = std::mem::take(&mut entry.held);
        input.extend_from_slice(fresh);
        let (verdict, wrote) = self.call_only(token, |protocol, conn, io| protocol.on_data(conn, &input, io));
        input.drain(..verdict.consumed.min(input.len()));
        if let Some(entry) = self.entry(ConnId::of(token)) {
            entry.held = input;
        }
        self.note_verdict(token, verdict.then, wrote);
        self.carry_out_deferred();
        verdict
    }

    /// What a verdict says of connection `token` once `on_data` returned, `wrote`
    /// whether it wrote: paused, or closing (what it holds is dropped).
    pub(super) fn note_verdict(&mut self, token: Token, then: Then, wrote: bool) {
        let Some(entry) = self.entry(ConnId::of(token)) else { return };
        entry.paused = then == Then::Pause;
        entry.awaiting_output = then == Then::Pause && !wrote;
        if then == Then::Close {
            entry.closing = true;
            (entry.held, entry.unread) = (Vec::new(), Vec::new());
        }
    }
}
