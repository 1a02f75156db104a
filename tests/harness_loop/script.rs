//! Scripts: what the test's clients do, step by step.

use std::fmt;

use super::command::Command;

/// One thing a client does; the next step comes once the answer to this one is in.
#[derive(Clone, PartialEq, Eq)]
pub enum Step {
    /// The client of the connection named sends these bytes, in one write.
    Send(char, String),
    /// The client of the connection named shuts down its writing side: the end of
    /// its stream.
    End(char),
}

impl fmt::Debug for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Send(name, bytes) => write!(f, "Send('{name}', {bytes:?})"),
            Step::End(name) => write!(f, "End('{name}')"),
        }
    }
}

impl Step {
    /// The connection whose client takes this step.
    pub fn name(&self) -> char {
        match *self {
            Step::Send(name, _) | Step::End(name) => name,
        }
    }
}

/// `name`'s client sends `commands`, a line each.
pub fn send(name: char, commands: &[Command]) -> Step {
    Step::Send(name, commands.iter().map(|command| command.render() + "\n").collect())
}
