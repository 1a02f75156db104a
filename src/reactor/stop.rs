//! A graceful stop: what becomes of the listener, how long idle connections are
//! kept, and when whatever is left is closed.

use std::time::{Duration, Instant};

use super::clock::far_future;

/// How a graceful stop goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DrainOptions {
    /// What becomes of the listener.
    pub listener: ListenerFate,
    /// How long idle keep-alive connections are kept: a client about to send on
    /// one gets its answer (with `Connection: close`) instead of a close under its
    /// feet; after it they are closed, and a connection that turns idle is closed
    /// at once.
    pub grace: Duration,
    /// When whatever is still open is closed.
    pub timeout: Duration,
}

/// What a graceful stop does with the loop's listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListenerFate {
    /// Accepts the connections already queued (they are served like the others),
    /// then closes it: once every process has closed it, new connections are
    /// refused at once, so a client or a load balancer retries elsewhere instead of
    /// waiting for a queue nobody reads. For a stop.
    CloseAfterQueue,
    /// Stops accepting at once and lets it go: another loop accepts from the same
    /// socket, so nothing queued is lost. For a reload or an upgrade.
    HandOver,
}

/// A graceful stop under way: its times, by the loop's clock.
#[derive(Debug)]
pub(crate) struct Stop {
    /// When every connection left is closed.
    deadline: Instant,
    /// Until then idle connections are kept; `None` once it has passed.
    grace_until: Option<Instant>,
}

impl Stop {
    /// A stop as `options` say, begun at `now`.
    pub(crate) fn new(options: &DrainOptions, now: Instant) -> Stop {
        Stop {
            deadline: now.checked_add(options.timeout).unwrap_or_else(|| far_future(now)),
            grace_until: Some(now.checked_add(options.grace).unwrap_or(now)),
        }
    }

    /// When the grace ends, if it has not.
    pub(crate) fn grace_until(&self) -> Option<Instant> {
        self.grace_until
    }

    /// Whether the grace has ended by `now`: true once, the first time it has.
    pub(crate) fn grace_ends(&mut self, now: Instant) -> bool {
        let ends = self.grace_until.is_some_and(|until| until <= now);
        if ends {
            self.grace_until = None;
        }
        ends
    }

    /// When every connection left is closed.
    pub(crate) fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the stop's deadline has come by `now`.
    pub(crate) fn expired(&self, now: Instant) -> bool {
        self.deadline <= now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grace_ends_once_and_the_timeout_when_it_says() {
        let now = Instant::now();
        let options = DrainOptions {
            listener: ListenerFate::HandOver,
            grace: Duration::from_millis(50),
            timeout: Duration::from_millis(150),
        };
        let mut stop = Stop::new(&options, now);
        assert_eq!(stop.grace_until(), Some(now + Duration::from_millis(50)));
        assert!(!stop.grace_ends(now + Duration::from_millis(49)));
        assert!(stop.grace_ends(now + Duration::from_millis(50)));
        assert!(!stop.grace_ends(now + Duration::from_secs(1)), "once");
        assert_eq!(stop.grace_until(), None);
        assert_eq!(stop.deadline(), now + Duration::from_millis(150));
        assert!(!stop.expired(now + Duration::from_millis(149)));
        assert!(stop.expired(now + Duration::from_millis(150)));
        let forever = DrainOptions { timeout: Duration::MAX, ..options };
        assert!(!Stop::new(&forever, now).expired(now + Duration::from_secs(1 << 30)));
    }
}
