//! The divergences between the harness and the loop found so far, which the
//! protocol steers clear of in the property (each refused with `no ...`), so that
//! it finds new ones; each is shown by an ignored test in `divergences.rs`.

use super::{Command, Delay, OnTimer, Scripted};

/// Whether the protocol steers clear of what the harness and the loop are known to
/// do differently (see [`Scripted::known_divergence`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Known {
    /// Each command that would meet a known divergence is refused (`no ...`), so
    /// that the property finds new ones.
    Avoided,
    /// Carried out: for the tests that show them.
    Met,
}

/// Where a command came in its `on_data` call.
#[derive(Clone, Copy, Debug)]
pub(super) struct Place {
    /// The call's input began with input held from the call before.
    pub(super) after_held: bool,
    /// The call goes on after a pause.
    pub(super) going_on: bool,
    /// Nothing follows its line.
    pub(super) last: bool,
}

impl Scripted {
    /// The connection `command` asks for something that calls it back, if any.
    pub(super) fn called_back(command: &Command) -> Option<char> {
        match *command {
            Command::Wake(to)
            | Command::Poke(to)
            | Command::Resume(to)
            | Command::Shut(to)
            | Command::Close(to) => Some(to),
            _ => None,
        }
    }

    /// Whether `command` asks something of a connection, which the loop does once
    /// the call returns.
    fn asks(command: &Command) -> bool {
        Scripted::called_back(command).is_some()
            || matches!(command, Command::To(..) | Command::Open(_) | Command::Fail(_))
    }

    /// Whether `command`, at `place` in its call, would meet a divergence between
    /// the harness and the loop found before, each shown by the ignored test of
    /// `divergences.rs` named beside it.
    pub(super) fn known_divergence(&self, name: char, command: &Command, place: Place) -> bool {
        match *command {
            // `what_a_call_going_on_after_a_pause_asks_waits_for_the_next_call`; and,
            // whatever it asks, `a_timer_due_fires_between_the_rounds_of_a_connection_served_again`
            // and `a_connect_completes_between_the_rounds_of_a_connection_served_again`.
            ref command if place.going_on && Scripted::asks(command) => true,
            // `a_close_after_held_input_lingers_with_nothing_held`, and
            // `a_connection_closing_itself_is_heard_of_before_what_it_asked`.
            // (What it asks of itself does nothing once it closes, in either.)
            Command::Quit => {
                (place.after_held && place.last) || self.calling_back.iter().any(|&to| to != name)
            }

            // `shutdown_of_a_connection_whose_input_ended_does_not_close_it`,
            // `a_connection_whose_input_ended_closed_by_another_is_told_done`.
            Command::Shut(to) | Command::Close(to) if self.input_ended.contains(&to) => true,

            // `shutdown_of_a_connection_being_opened_drops_its_greeting`,
            // `close_of_a_connection_being_opened_is_heard_at_once`.
            Command::Shut(to) | Command::Close(to) if self.connecting == Some(to) => true,
            // `a_paused_connection_written_to_goes_on_when_the_test_takes_the_output`:
            // in the loop a paused connection goes on at once when called back with
            // its output sent, before whatever follows in the chain; so too this
            // one, if it pauses after asking for a call back of its own.
            Command::Wake(to) | Command::Poke(to) | Command::Resume(to) | Command::Shut(to) => {
                self.paused.contains(&to) && !place.last
            }
            Command::Pause | Command::Hold => self.calling_back.contains(&name),

            // `a_timer_set_again_at_once_fires_before_the_paused_connection_goes_on`.
            Command::Timer(Delay::Past | Delay::Ms(0), OnTimer::Ticks(2..)) => true,
            // `a_write_to_a_connection_that_said_close_is_taken`.
            Command::To(to, _) => self.closing.contains(&to),
            // `close_of_a_connection_holding_input_does_not_linger`; a connection
            // closing itself holds what its call leaves, known only at the end.
            Command::Close(to) => self.holding.contains(&to) || (to == name && !place.last),
            _ => false,
        }
    }
}
