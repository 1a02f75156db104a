//! The `Harness` against the real loop. The docs promise that the harness drives a
//! protocol "the way the loop does": here one protocol ([`protocol::Scripted`]) is
//! driven by scripts of client steps, once through a `Harness` and once through a
//! `Reactor` over sockets on 127.0.0.1, and both must give the same callbacks in the
//! same order (with the same input, verdicts and close reasons; only where a
//! lingering connection's close comes may differ, see `outcome`), the same bytes
//! to every client, and the same ends of streams.
//!
//! - `command`: the commands, one a line, that the protocol obeys;
//! - `protocol`: the protocol, which logs every callback, and (`protocol/remaining.rs`)
//!   the divergence that remains, which it steers clear of in the property;
//! - `script`: the clients' steps, and how proptest makes them;
//! - `harness_side`: a script through the harness, driven as a user would, with
//!   what it did after each step;
//! - `loop_side`: a script through the loop, each step taken once the loop did
//!   what the harness did before it; its clients act as the harness's peer does;
//! - `outcome`: what a run gave, and the comparison;
//! - `divergences`: the divergences the property found, each a test that the
//!   drivers now agree, and on what the docs say; and, ignored, the one that remains.
//!
//! A client sends a step only once everything the previous one set off has
//! happened (timers' callbacks included), so nothing depends on how fast either
//! side is; nothing here measures time.
//!
//! With the `tls` feature the same scripts run again with the accepted connection
//! speaking TLS: through `Harness::with_tls`, whose test is its TLS client, and
//! through the loop with `Reactor::set_tls`, whose client is rustls's. A layer at
//! the wire changes bytes, not meaning: both must give the same callbacks and the
//! same plaintext.

mod command;
mod divergences;
mod harness_side;
mod loop_side;
mod outcome;
mod protocol;
mod script;

use percore::reactor::Config;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

use command::{Command, Delay, OnTimer};
use harness_side::through_the_harness;
use loop_side::LoopSide;
use outcome::{assert_agree, Outcome};
use protocol::{Remaining, ACCEPTED};
use script::{send, Step};

/// The limits both drivers run under: no timeouts. The harness's clock moves only
/// to the scripts' timers, a few milliseconds; the loop's is real, and a run
/// slowed down on a loaded machine must not meet a timeout the harness does not.
fn config() -> Config {
    Config {
        message_timeout: None,
        idle_timeout: None,
        send_timeout: None,
        connect_timeout: None,
        ..Config::default()
    }
}

/// What the accepted connection speaks: plaintext, or TLS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    Plain,
    #[cfg(feature = "tls")]
    Tls,
}

/// The test certificate's TLS, for the accepted connection.
#[cfg(feature = "tls")]
fn server_tls() -> percore::tls::ServerTls {
    let file = |name: &str| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/tls").join(name);
    percore::tls::ServerTls::from_pem_files(file("localhost.pem"), file("localhost.key"))
        .expect("the test certificate")
}

/// Runs `script` through the harness and through the loop, steering clear of the
/// divergence that remains; they must agree. Returns what they gave.
fn agree(script: &[Step]) -> Outcome {
    agree_where(script, Remaining::SteeredClear)
}

/// Runs `script` through both, the divergence that remains avoided or met as
/// `remaining` says.
fn agree_where(script: &[Step], remaining: Remaining) -> Outcome {
    agree_over(script, remaining, Wire::Plain)
}

/// Runs `script` through both, the accepted connection speaking as `wire` says.
fn agree_over(script: &[Step], remaining: Remaining, wire: Wire) -> Outcome {
    let real = LoopSide::start(remaining, wire);
    let expected = through_the_harness(script, real.targets(), remaining, wire);
    let (outcome, stopped) = real.run(script, &expected);
    assert_agree(script, &expected.outcome, &outcome, stopped.as_deref());
    outcome
}

/// What the accepted connection's client received, and whether its stream ended.
fn accepted(outcome: &Outcome) -> (&str, bool) {
    let client = &outcome.clients[&ACCEPTED];
    (&client.bytes, client.ended)
}

#[test]
fn the_harness_and_the_loop_give_one_conversation_the_same_bytes() {
    // Each feature of the contract in turn, on the accepted connection alone, with
    // the answers the protocol must give.
    let steps: &[(&str, &str)] = &[
        // A write on data; a partial line left unconsumed ...
        ("say hello\nsay wor", "hello\n"),
        // ... comes first in the next call, completed.
        ("ld\n", "world\n"),
        // A timer set in on_data.
        ("timer 20 ring\n", "ring\n"),
        // A timer set again inside on_timer fires again.
        ("timer 10 ticks 3\n", "tick 3\ntick 2\ntick 1\n"),
        // A timer of zero duration, and one set in the past, fire at the next look.
        ("timer 0 ring\n", "ring\n"),
        ("timer past ring\n", "ring\n"),
        // A pause with nothing written holds the rest of the input until the timer
        // resumes the connection; the held line is answered then, and only then.
        ("timer 20 resume\nhold\nsay after the hold\n", "after the hold\n"),
        // A pause with output written goes on with the rest once that output is sent.
        ("pause\npause\nsay after the steps\n", "pause\npause\nafter the steps\n"),
        // A wake asked by a callback is carried out once it returns.
        ("wake a\nsay before the wake\n", "before the wake\nwoken\n"),
        // A close: what comes after it is never handed in.
        ("quit\nsay never\n", "bye\n"),
    ];
    let script: Vec<Step> = steps.iter().map(|(sent, _)| Step::Send(ACCEPTED, (*sent).into())).collect();
    let transcript: String =
        std::iter::once("hi a\n").chain(steps.iter().map(|(_, answer)| *answer)).collect();
    let outcome = agree(&script);
    assert_eq!(accepted(&outcome), (transcript.as_str(), true));
    #[cfg(feature = "tls")]
    {
        let over_tls = agree_over(&script, Remaining::SteeredClear, Wire::Tls);
        assert_eq!(
            (&over_tls.log, accepted(&over_tls)),
            (&outcome.log, accepted(&outcome)),
            "the same over TLS"
        );
    }
}

#[test]
fn the_harness_and_the_loop_give_a_conversation_across_connections_the_same_bytes() {
    let script = [
        // Written to a connection being opened: sent before its greeting.
        Step::Send(ACCEPTED, "open b\nto b early\n".into()),
        // A pause with nothing written, ended by a wake whose callback writes ...
        Step::Send('b', "hold\nsay held\n".into()),
        Step::Send(ACCEPTED, "say waking\nwake b\n".into()),
        // ... and one ended by a resume from another connection.
        Step::Send('b', "hold\nsay again\n".into()),
        Step::Send(ACCEPTED, "resume b\n".into()),
        // A connect refused.
        Step::Send(ACCEPTED, "fail d\n".into()),
        // Shut down, `b` still reads, and may write to others.
        Step::Send(ACCEPTED, "shut b\n".into()),
        Step::Send('b', "stay\nto a from b\nsay dropped\n".into()),
        // Its input ends too: it is closed.
        Step::End('b'),
        // A close with input after it lingers: the client, as the harness's peer,
        // closes when it reads the end of the stream.
        Step::Send(ACCEPTED, "quit\nsay never\n".into()),
    ];
    let outcome = agree(&script);
    assert_eq!(accepted(&outcome), ("hi a\nwaking\nfrom b\nbye\n", true));
    assert_eq!(outcome.clients[&'b'].bytes, "early\nhi b\nwoken\nheld\nagain\n");
    let closes: Vec<&str> =
        outcome.log.iter().filter(|record| record.contains(" close ")).map(String::as_str).collect();
    assert_eq!(
        closes,
        [
            "d close ConnectFailed(ConnectionRefused) \"\", wrote 0",
            "b close Done \"\", wrote 0",
            "a close Done \"\", wrote 0"
        ]
    );
}

#[test]
fn a_connection_that_said_close_hears_from_no_timer_nor_wake() {
    // The loop calls back an open connection only: once `quit` said close, the
    // timer set before it and the wake asked beside it do nothing, in the harness
    // as in the loop.
    let script = [send(
        ACCEPTED,
        &[Command::Timer(Delay::Ms(20), OnTimer::Ring), Command::Wake(ACCEPTED), Command::Quit],
    )];
    let outcome = agree(&script);
    assert_eq!(accepted(&outcome), ("hi a\nbye\n", true));
}

/// Cases per run of the property: each runs a real loop, for some tens of
/// milliseconds (`PROPTEST_CASES` asks for more).
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|cases| cases.parse().ok()).unwrap_or(100)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        // Beside this file: `tests/harness_loop/main.proptest-regressions`.
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_harness_and_the_loop_agree_on_any_script(script in script::script(24)) {
        agree(&script);
    }

    #[cfg(feature = "tls")]
    #[test]
    fn the_harness_and_the_loop_agree_on_any_script_over_tls(script in script::script(24)) {
        agree_over(&script, Remaining::SteeredClear, Wire::Tls);
    }

    #[test]
    fn every_command_is_read_back_as_itself(command in script::command()) {
        // A typo in a rendering would make a step test nothing, and both drivers
        // would still agree.
        prop_assert_eq!(Command::parse(command.render().as_bytes()), Some(command));
    }
}

#[test]
fn a_line_that_is_no_command_is_answered_as_unknown() {
    assert_eq!(Command::parse(b"say a b"), Some(Command::Say("a b".into())));
    assert_eq!(Command::parse(b"timer x ring"), None);
    assert_eq!(Command::parse(b"to bc x"), None);
    let outcome = agree(&[Step::Send(ACCEPTED, "timer x ring\n".into())]);
    assert_eq!(accepted(&outcome), ("hi a\n? timer x ring\n", false));
}
