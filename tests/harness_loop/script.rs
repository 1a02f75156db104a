//! Scripts: what the test's clients do, step by step; and how proptest makes them,
//! from commands for the protocol cut into reads anywhere.

use std::collections::{HashMap, HashSet};
use std::fmt;

use proptest::prelude::*;

use super::command::{Command, Delay, OnTimer};
use super::protocol::ACCEPTED;

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

/// A step before the cutting.
#[derive(Clone, Debug)]
enum Plan {
    /// Commands for one connection, and how many bytes to cut off their end to go
    /// with that connection's next step.
    Lines(char, Vec<Command>, usize),
    /// The end of a stream.
    End(char),
}

/// Scripts of up to `steps` steps.
pub fn script(steps: usize) -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(plan(), 1..=steps).prop_map(|plans| cut(&plans))
}

/// Renders `plans`, cutting the end off each step's bytes (at most all but one of
/// them) to start that connection's next sending with: a line is completed by a
/// later step, or, where the next step ends the stream (or none comes), never.
/// A step sending on a connection no earlier step opens sends on the accepted one
/// instead.
fn cut(plans: &[Plan]) -> Vec<Step> {
    let mut carried: HashMap<char, String> = HashMap::new();
    let mut opened = HashSet::from([ACCEPTED]);
    let mut steps = Vec::new();
    for plan in plans {
        match plan {
            Plan::Lines(name, commands, cut) => {
                let name = if opened.contains(name) { name } else { &ACCEPTED };
                let Step::Send(_, fresh) = send(*name, commands) else { unreachable!("send sends") };
                let mut bytes = carried.remove(name).unwrap_or_default() + &fresh;
                let cut = (*cut).min(bytes.len() - 1);
                carried.insert(*name, bytes.split_off(bytes.len() - cut));
                steps.push(Step::Send(*name, bytes));
                let opens = commands.iter().filter_map(|command| match command {
                    Command::Open(name) => Some(*name),
                    _ => None,
                });
                opened.extend(opens);
            }
            // The end of a stream no step opened is no step.
            Plan::End(name) if !opened.contains(name) => {}
            Plan::End(name) => {
                carried.remove(name);
                steps.push(Step::End(*name));
            }
        }
    }
    steps
}

/// The clients: the accepted connection's more often than those of the connections
/// the protocol opens (see `cut` for one no step opens; the harness skips a step
/// for one that is closed, or whose client ended its stream).
fn client() -> impl Strategy<Value = char> {
    prop_oneof![3 => Just(ACCEPTED), 2 => Just('b'), 1 => Just('c')]
}

/// Any connection; now and then `d`, which is only ever refused (or never opened).
fn any_name() -> impl Strategy<Value = char> {
    prop_oneof![3 => Just(ACCEPTED), 3 => Just('b'), 3 => Just('c'), 1 => Just('d')]
}

/// Mostly lines of commands, now and then the end of a stream.
fn plan() -> impl Strategy<Value = Plan> {
    let lines = (client(), prop::collection::vec(command(), 1..=4), prop::option::weighted(0.3, reaching()));
    prop_oneof![
        16 => (lines, 0..8usize).prop_map(|((name, mut commands, last), cut)| {
            commands.extend(last);
            Plan::Lines(name, commands, cut)
        }),
        1 => client().prop_map(Plan::End),
    ]
}

/// A command that calls another connection back, now and then added last to a
/// step: a wake or a resume is what ends a pause with nothing written.
fn reaching() -> impl Strategy<Value = Command> {
    prop_oneof![
        any_name().prop_map(Command::Wake),
        any_name().prop_map(Command::Poke),
        any_name().prop_map(Command::Resume),
    ]
}

/// Any command, the common ones more often.
pub fn command() -> impl Strategy<Value = Command> {
    let word = "[a-z]{1,4}";
    prop_oneof![
        4 => word.prop_map(Command::Say),
        3 => (any_name(), word).prop_map(|(name, text)| Command::To(name, text)),
        4 => prop::sample::select(vec!['b', 'c']).prop_map(Command::Open),
        1 => prop::sample::select(vec!['c', 'd']).prop_map(Command::Fail),
        2 => Just(Command::Pause),
        2 => Just(Command::Hold),
        3 => (delay(), on_timer()).prop_map(|(delay, action)| Command::Timer(delay, action)),
        1 => Just(Command::Cancel),
        3 => any_name().prop_map(Command::Wake),
        1 => any_name().prop_map(Command::Poke),
        3 => any_name().prop_map(Command::Resume),
        1 => any_name().prop_map(Command::Shut),
        1 => any_name().prop_map(Command::Close),
        1 => Just(Command::Quit),
        2 => Just(Command::Stay),
    ]
}

/// Short delays: the loop waits for them for real.
fn delay() -> impl Strategy<Value = Delay> {
    prop_oneof![Just(Delay::Past), Just(Delay::Ms(0)), Just(Delay::Ms(1)), Just(Delay::Ms(5))]
}

/// Each thing a timer may do, `ticks` setting itself again.
fn on_timer() -> impl Strategy<Value = OnTimer> {
    prop_oneof![
        Just(OnTimer::Ring),
        Just(OnTimer::Resume),
        Just(OnTimer::Quiet),
        Just(OnTimer::Close),
        (1..=3u32).prop_map(OnTimer::Ticks),
    ]
}
