//! A protocol fed a connection's reads the way the loop feeds it, without a socket:
//! for the property tests and (included by path) the fuzz targets, which live in a
//! workspace of their own.

use percore::reactor::{Harness, Protocol, Then};

/// Every byte the protocol in `harness` writes given `reads` as a connection's reads,
/// as the loop hands them: what a call leaves unconsumed comes again with the next
/// read (at once after a pause, its output being taken); after a close, nothing more
/// is read.
pub fn serve_in_reads<P: Protocol>(harness: &mut Harness<P>, reads: &[&[u8]]) -> Vec<u8> {
    let (mut pending, mut out) = (Vec::new(), Vec::new());
    for read in reads {
        pending.extend_from_slice(read);
        loop {
            let verdict = harness.data(&pending);
            pending.drain(..verdict.consumed.min(pending.len()));
            out.extend(harness.take_output());
            match verdict.then {
                Then::Read => break,
                Then::Pause => continue,
                Then::Close => return out,
            }
        }
    }
    out
}
