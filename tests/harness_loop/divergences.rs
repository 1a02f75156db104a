//! Divergences between the harness and the loop that the property found, each
//! with its smallest script, ignored until the harness (or the loop) is made to
//! agree. The protocol steers clear of each in the property
//! (`protocol/known.rs`); each test meets its divergence instead. Those about
//! pauses come first, then those about closes, then the one found once both drove
//! one connection machine.

use percore::reactor::Harness;

use super::agree_where;
use super::command::{Command, Delay, OnTimer};
use super::protocol::{Known, Scripted, Targets, ACCEPTED};
use super::script::{send, Step};

#[test]
#[ignore = "divergence: a paused connection called back with its output sent (a wake that writes, \
            or any call on one paused with output) goes on at once in the loop, before the rest of \
            the chain; in the harness only when the test takes its output"]
fn a_paused_connection_written_to_goes_on_when_the_test_takes_the_output() {
    let script = [
        send(ACCEPTED, &[Command::Open('b')]),
        send('b', &[Command::Hold]),
        send(ACCEPTED, &[Command::Wake('b'), Command::Wake(ACCEPTED)]),
    ];
    agree_where(&script, Known::Met);
}

#[test]
#[ignore = "divergence: Harness::advance fires a timer its on_timer set again at once before the \
            paused connection that on_timer wrote to goes on; the loop lets it go on first"]
fn a_timer_set_again_at_once_fires_before_the_paused_connection_goes_on() {
    let script = [send(
        ACCEPTED,
        &[Command::Timer(Delay::Past, OnTimer::Ticks(2)), Command::Hold, Command::Say("a".into())],
    )];
    agree_where(&script, Known::Met);
}

#[test]
#[ignore = "divergence: when on_data goes on after a pause and pauses again (or more input or the \
            end of the stream is read), the loop calls it again before carrying out what it asked \
            (core.rs read_into: the held input's `continue`); the harness, as the docs say, first"]
fn what_a_call_going_on_after_a_pause_asks_waits_for_the_next_call() {
    let script = [send(
        ACCEPTED,
        &[Command::Pause, Command::Wake(ACCEPTED), Command::Pause, Command::Say("a".into())],
    )];
    agree_where(&script, Known::Met);
}

#[test]
#[ignore = "divergence: a callback that closes its own connection and asks something of another: \
            the loop calls its on_close before carrying out what it asked; the harness leaves the \
            close to the test, after them (the docs: done as soon as the callback returns)"]
fn a_connection_closing_itself_is_heard_of_before_what_it_asked() {
    let script =
        [send(ACCEPTED, &[Command::Open('b')]), send('b', &[Command::Poke(ACCEPTED), Command::Quit])];
    agree_where(&script, Known::Met);
}

#[test]
#[ignore = "divergence: the harness closes a connection holding input at once on Io::close; \
            the loop lingers, and calls on_close only once the peer ended its stream"]
fn close_of_a_connection_holding_input_does_not_linger() {
    // `a` holds "say a" when it closes itself; meanwhile `b` is opened. The loop
    // lingers on `a` (its client has not ended) and hears of `b` first; `a` closes
    // when its client ends.
    let script = [
        Step::Send(ACCEPTED, "open b\nclose a\nsay a".into()),
        Step::Send('b', "say b\n".into()),
        Step::End(ACCEPTED),
    ];
    agree_where(&script, Known::Met);
}

#[test]
#[ignore = "divergence: the loop lingers after a close that consumed all its input when that input \
            began with input held before, so on_close comes only at the peer's end or after 5 s, \
            TimedOut; DESIGN.md lingers only for input held or unread"]
fn a_close_after_held_input_lingers_with_nothing_held() {
    let script = [Step::Send(ACCEPTED, "say a".into()), Step::Send(ACCEPTED, "\nquit\n".into())];
    agree_where(&script, Known::Met);
}

#[test]
#[ignore = "divergence: the harness takes what is written to a connection that said close and \
            lingers; the loop drops it (Io::write_to: dropped if closing)"]
fn a_write_to_a_connection_that_said_close_is_taken() {
    let script = [
        send(ACCEPTED, &[Command::Open('b')]),
        Step::Send('b', "quit\nsay a\n".into()),
        send(ACCEPTED, &[Command::To('b', "a".into())]),
        Step::End('b'),
    ];
    agree_where(&script, Known::Met);
}

#[test]
#[ignore = "divergence: the harness closes a connection being opened at once on Io::close, its \
            output never sent; the loop waits for it to be established (as Io::connect says), sends \
            that output and closes it then, after the rest of the chain"]
fn close_of_a_connection_being_opened_is_heard_at_once() {
    let script = [send(
        ACCEPTED,
        &[Command::Open('b'), Command::To('b', "x".into()), Command::Close('b'), Command::Wake(ACCEPTED)],
    )];
    let outcome = agree_where(&script, Known::Met);
    assert_eq!(outcome.clients[&'b'].bytes, "x\n");
}

#[test]
#[ignore = "divergence: the harness drops what a connection being opened writes once it is shut down; \
            the loop sends it once established (Io::connect: shutdown waits for that)"]
fn shutdown_of_a_connection_being_opened_drops_its_greeting() {
    let script = [send(ACCEPTED, &[Command::Open('b'), Command::Shut('b')])];
    let outcome = agree_where(&script, Known::Met);
    assert_eq!(outcome.clients[&'b'].bytes, "hi b\n");
}

#[test]
#[ignore = "divergence: Io::shutdown of a connection whose input ended closes it at once in the \
            loop (Closed::Done, as Io::shutdown says); the harness marks it shut and leaves it open"]
fn shutdown_of_a_connection_whose_input_ended_does_not_close_it() {
    let script = [
        send(ACCEPTED, &[Command::Open('b')]),
        send('b', &[Command::Stay]),
        Step::End('b'),
        send(ACCEPTED, &[Command::Shut('b'), Command::Wake(ACCEPTED)]),
    ];
    agree_where(&script, Known::Met);
}

#[test]
#[ignore = "divergence: Io::close of a connection whose input ended (kept open for writing): the \
            harness tells on_close Closed::Done, the loop Closed::ByPeer (Closed's docs: Done is \
            'the protocol said close')"]
fn a_connection_whose_input_ended_closed_by_another_is_told_done() {
    let script = [
        send(ACCEPTED, &[Command::Open('b'), Command::Stay]),
        Step::End(ACCEPTED),
        send('b', &[Command::Close(ACCEPTED)]),
    ];
    agree_where(&script, Known::Met);
}

#[test]
#[ignore = "divergence: once on_input_end says close, Harness::unconsumed is empty; the loop hands \
            what was held to on_close (ByPeer: a message delimited by the end of the stream), as \
            unconsumed's docs say it would"]
fn what_is_held_when_the_input_ends_stays_unconsumed() {
    let nowhere = ([127, 0, 0, 1], 9).into();
    let targets = Targets { listening: nowhere, refusing: nowhere };
    let mut harness = Harness::new(Scripted::new(targets, Known::Met));
    harness.open();
    harness.receive(b"say a");
    harness.input_end();
    assert_eq!(harness.unconsumed(harness.id()), b"say a");
}

// The loop serves a connection again, in rounds, once what its call asked is done
// (`Needs::Again`), one round a turn; between two rounds it fires the timers due
// and takes the next turn's events. The harness does every round before it
// returns. Here `a` goes on after a pause and asks again (`wake b`), so that its
// going on, the third round, comes after the turn's timers and events in the loop.

#[test]
#[ignore = "divergence: a timer due fires in the loop between the second and third rounds of \
            a connection served again (Reactor::turn: a round, then the timers due); the \
            harness does every round, then fires it"]
fn a_timer_due_fires_between_the_rounds_of_a_connection_served_again() {
    let script = [
        send(ACCEPTED, &[Command::Open('b')]),
        send(
            ACCEPTED,
            &[
                Command::Timer(Delay::Past, OnTimer::Ring),
                Command::Wake('b'),
                Command::Pause,
                Command::Wake('b'),
                Command::Pause,
                Command::Say("z".into()),
            ],
        ),
    ];
    // The loop: ..., `b wake`, `a timer`, `a data "pause\nsay z\n"`; the harness
    // the last two the other way round.
    agree_where(&script, Known::Met);
}

#[test]
#[ignore = "divergence: a connect completes in the loop between the second and third rounds of \
            a connection served again (its next turn's events come first); the harness does \
            every round before the test can establish it"]
fn a_connect_completes_between_the_rounds_of_a_connection_served_again() {
    let script = [send(
        ACCEPTED,
        &[Command::Open('b'), Command::Pause, Command::Wake('b'), Command::Pause, Command::Say("z".into())],
    )];
    // The loop: ..., `b wake`, `b open`, `a data "pause\nsay z\n"`; the harness the
    // last two the other way round.
    agree_where(&script, Known::Met);
}
