//! The divergence between the harness and the loop that remains, which the
//! protocol steers clear of in the property (each command that would meet it is
//! refused with `no ...`), so that the property finds any other; the ignored tests
//! at the end of `divergences.rs` show it.
//!
//! When a call asks something of a connection and more of its connection's input
//! is to be handed in (a pause that ends once its output is sent, input read while
//! it was paused, the end of its stream), the driver does what was asked first and
//! serves the connection again in a later round (`Needs::Again`). The loop does one
//! such round a turn, then fires the timers due (as the harness does too), and takes
//! the next turn's events (a connect's completion) before the next round. The
//! harness's test establishes a connect only once the harness's call returns, after
//! every round, and what follows from the connect (its `on_open`, a timer it arms)
//! then comes after them too. The two part when the rounds run past the first, which only a call
//! of the first round can make them do: one that goes on after a pause (its turn
//! came once the call before it asked something) and asks something again, with
//! more of its input behind it. A call that goes on after a pause and asks nothing
//! ends every chain at its first round.

use super::{Command, Scripted};

/// Whether the protocol steers clear of the divergence that remains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Remaining {
    /// Each command that would meet it is refused (`no ...`): the property.
    SteeredClear,
    /// Carried out: for the tests that show it.
    Met,
}

impl Scripted {
    /// Whether `command` asks something of a connection, which the loop does once
    /// the call returns.
    fn asks(command: &Command) -> bool {
        matches!(
            command,
            Command::To(..)
                | Command::Open(_)
                | Command::Fail(_)
                | Command::Wake(_)
                | Command::Poke(_)
                | Command::Resume(_)
                | Command::Shut(_)
                | Command::Close(_)
        )
    }

    /// Whether `command` could start a chain of rounds that runs past the first: it
    /// asks something of a connection in a call that goes on after a pause.
    pub(super) fn meets_the_remaining_divergence(&self, command: &Command) -> bool {
        self.going_on && Scripted::asks(command)
    }
}
