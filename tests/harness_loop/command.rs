//! The commands the test protocol obeys, one a line: how each is written, and read.

/// One line of input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// `say TEXT`: writes TEXT and a newline.
    Say(String),
    /// `to NAME TEXT`: writes TEXT and a newline to connection NAME.
    To(char, String),
    /// `open NAME`: opens connection NAME to the test's listener.
    Open(char),
    /// `fail NAME`: opens connection NAME to a port where nothing listens.
    Fail(char),
    /// `pause`: writes `pause` and pauses before this line, which the next call
    /// skips: the connection goes on once that output is sent.
    Pause,
    /// `hold`: pauses as `pause` does but writes nothing: the connection goes on
    /// once a timer or a wake writes to it, or something resumes it.
    Hold,
    /// `timer DELAY ACTION`: arms the connection's timer, unless another
    /// connection's is armed (see [`Scripted::timer`]).
    Timer(Delay, OnTimer),
    /// `cancel`: cancels the connection's timer.
    Cancel,
    /// `wake NAME`: wakes NAME, whose `on_wake` writes `woken`.
    Wake(char),
    /// `poke NAME`: wakes NAME, whose `on_wake` writes nothing.
    Poke(char),
    /// `resume NAME`: resumes NAME.
    Resume(char),
    /// `shut NAME`: shuts NAME down for writing.
    Shut(char),
    /// `close NAME`: closes NAME.
    Close(char),
    /// `quit`: writes `bye` and closes; what follows is never handed in.
    Quit,
    /// `stay`: the end of the connection's input leaves it open for writing.
    Stay,
}

/// When a timer fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delay {
    /// So many milliseconds from now.
    Ms(u64),
    /// A second ago: at the next look.
    Past,
}

/// What a connection's timer does when it fires.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnTimer {
    /// Writes `ring`.
    #[default]
    Ring,
    /// Resumes its connection, writing nothing.
    Resume,
    /// Nothing but the log's record.
    Quiet,
    /// Writes `ring` and closes its connection.
    Close,
    /// Writes `tick N` and arms itself again with the same delay, N times in all.
    Ticks(u32),
}

impl Command {
    /// The line that means this command, without its newline.
    pub fn render(&self) -> String {
        match self {
            Command::Say(text) => format!("say {text}"),
            Command::To(name, text) => format!("to {name} {text}"),
            Command::Open(name) => format!("open {name}"),
            Command::Fail(name) => format!("fail {name}"),
            Command::Pause => "pause".into(),
            Command::Hold => "hold".into(),
            Command::Timer(delay, action) => {
                let delay = match delay {
                    Delay::Ms(ms) => ms.to_string(),
                    Delay::Past => "past".into(),
                };
                let action = match action {
                    OnTimer::Ring => "ring".into(),
                    OnTimer::Resume => "resume".into(),
                    OnTimer::Quiet => "quiet".into(),
                    OnTimer::Close => "close".into(),
                    OnTimer::Ticks(n) => format!("ticks {n}"),
                };
                format!("timer {delay} {action}")
            }
            Command::Cancel => "cancel".into(),
            Command::Wake(name) => format!("wake {name}"),
            Command::Poke(name) => format!("poke {name}"),
            Command::Resume(name) => format!("resume {name}"),
            Command::Shut(name) => format!("shut {name}"),
            Command::Close(name) => format!("close {name}"),
            Command::Quit => "quit".into(),
            Command::Stay => "stay".into(),
        }
    }

    /// The command `line` means, if any.
    pub fn parse(line: &[u8]) -> Option<Command> {
        let text = std::str::from_utf8(line).ok()?;
        let (verb, rest) = text.split_once(' ').unwrap_or((text, ""));
        let name = |word: &str| {
            let mut chars = word.chars();
            chars.next().filter(|_| chars.next().is_none())
        };
        Some(match (verb, rest) {
            ("say", text) => Command::Say(text.into()),
            ("to", rest) => {
                let (to, text) = rest.split_once(' ')?;
                Command::To(name(to)?, text.into())
            }
            ("open", to) => Command::Open(name(to)?),
            ("fail", to) => Command::Fail(name(to)?),
            ("pause", "") => Command::Pause,
            ("hold", "") => Command::Hold,
            ("timer", rest) => {
                let (delay, action) = rest.split_once(' ')?;
                let delay = match delay {
                    "past" => Delay::Past,
                    ms => Delay::Ms(ms.parse().ok()?),
                };
                let action = match action.split_once(' ') {
                    None if action == "ring" => OnTimer::Ring,
                    None if action == "resume" => OnTimer::Resume,
                    None if action == "quiet" => OnTimer::Quiet,
                    None if action == "close" => OnTimer::Close,
                    Some(("ticks", n)) => OnTimer::Ticks(n.parse().ok()?),
                    _ => return None,
                };
                Command::Timer(delay, action)
            }
            ("cancel", "") => Command::Cancel,
            ("wake", to) => Command::Wake(name(to)?),
            ("poke", to) => Command::Poke(name(to)?),
            ("resume", to) => Command::Resume(name(to)?),
            ("shut", to) => Command::Shut(name(to)?),
            ("close", to) => Command::Close(name(to)?),
            ("quit", "") => Command::Quit,
            ("stay", "") => Command::Stay,
            _ => return None,
        })
    }
}
