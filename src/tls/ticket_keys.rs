//! The keys a server seals its session tickets with: one secret, made at start and
//! stepped forward every period by a one-way function, alike in every process that
//! holds it. A master makes it before it forks its workers, so every worker, and
//! every later generation of them, seals and opens tickets with the same key at the
//! same time without a word between them; a binary upgrade hands the secret to the
//! new master ([`TicketKeys::export`]). Each process forgets a key two periods
//! after it began to seal with it: a ticket opens for at least one period and at
//! most two, and a secret taken from a process later opens no older ticket.

use std::fmt;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use aws_lc_rs::hmac;
use aws_lc_rs::rand;
use rustls::server::ProducesTickets;

/// How long one key seals tickets, in seconds; the one before it still opens them
/// for as long again.
const PERIOD: u64 = 6 * 60 * 60;

/// The secret's length, and an export's: the period's number, then the secret.
const SECRET_LEN: usize = 32;
const PERIOD_LEN: usize = 8;
const EXPORT_LEN: usize = PERIOD_LEN + SECRET_LEN;

/// A server's ticket keys: rustls's ticketer.
pub(crate) struct TicketKeys {
    state: Mutex<Ratchet>,
}

/// The secret of one period, the key it gives, and the previous period's key.
struct Ratchet {
    period: u64,
    secret: [u8; SECRET_LEN],
    current: LessSafeKey,
    previous: Option<LessSafeKey>,
}

impl TicketKeys {
    /// A new random secret for this period.
    pub(crate) fn new() -> Result<TicketKeys, rustls::Error> {
        let mut secret = [0; SECRET_LEN];
        rand::fill(&mut secret).map_err(|_| rustls::Error::FailedToGetRandomBytes)?;
        Ok(TicketKeys::of(period_at(SystemTime::now()), secret))
    }

    fn of(period: u64, secret: [u8; SECRET_LEN]) -> TicketKeys {
        let current = key_of(&secret);
        TicketKeys { state: Mutex::new(Ratchet { period, secret, current, previous: None }) }
    }

    /// This period's number and secret, for the next process to go on from
    /// ([`import`](TicketKeys::import)); stepped forward to now first, so that it
    /// opens no ticket older than the previous period's.
    pub(crate) fn export(&self) -> Vec<u8> {
        self.export_at(SystemTime::now())
    }

    fn export_at(&self, now: SystemTime) -> Vec<u8> {
        let mut state = self.lock();
        state.advance_to(period_at(now));
        [&state.period.to_be_bytes()[..], &state.secret].concat()
    }

    /// Keys that go on from an export; `None` if `bytes` are not one.
    pub(crate) fn import(bytes: &[u8]) -> Option<TicketKeys> {
        let (period, secret) = bytes.split_first_chunk::<PERIOD_LEN>()?;
        let secret: [u8; SECRET_LEN] = secret.try_into().ok()?;
        (bytes.len() == EXPORT_LEN).then(|| TicketKeys::of(u64::from_be_bytes(*period), secret))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Ratchet> {
        // Nothing panics while holding it; a poisoned state is still whole.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `plain` sealed under the key of the period of `now`: the period's number,
    /// a random nonce, the ciphertext and its tag.
    fn seal_at(&self, plain: &[u8], now: SystemTime) -> Option<Vec<u8>> {
        let mut state = self.lock();
        state.advance_to(period_at(now));
        let mut nonce = [0; NONCE_LEN];
        rand::fill(&mut nonce).ok()?;
        let period = state.period.to_be_bytes();
        let mut ticket = Vec::with_capacity(PERIOD_LEN + NONCE_LEN + plain.len() + AES_256_GCM.tag_len());
        ticket.extend_from_slice(&period);
        ticket.extend_from_slice(&nonce);
        let mut sealed = plain.to_vec();
        let nonce = Nonce::assume_unique_for_key(nonce);
        state.current.seal_in_place_append_tag(nonce, Aad::from(period), &mut sealed).ok()?;
        ticket.extend_from_slice(&sealed);
        Some(ticket)
    }

    /// What `ticket` sealed, if a key this process holds at `now` opens it.
    fn open_at(&self, ticket: &[u8], now: SystemTime) -> Option<Vec<u8>> {
        let (period, rest) = ticket.split_first_chunk::<PERIOD_LEN>()?;
        let (nonce, sealed) = rest.split_first_chunk::<NONCE_LEN>()?;
        let mut state = self.lock();
        state.advance_to(period_at(now));
        let key = match state.period.checked_sub(u64::from_be_bytes(*period))? {
            0 => &state.current,
            1 => state.previous.as_ref()?,
            _ => return None,
        };
        let mut plain = sealed.to_vec();
        let nonce = Nonce::assume_unique_for_key(*nonce);
        let opened = key.open_in_place(nonce, Aad::from(*period), &mut plain).ok()?.len();
        plain.truncate(opened);
        Some(plain)
    }
}

impl Ratchet {
    /// Steps the secret forward to `period`, keeping the key of the one before it;
    /// a clock that went back steps nothing.
    fn advance_to(&mut self, period: u64) {
        while self.period < period {
            self.secret = derive(&self.secret, b"percore ticket secret");
            let next = key_of(&self.secret);
            self.previous = Some(std::mem::replace(&mut self.current, next));
            self.period += 1;
        }
    }
}

/// The AES-256-GCM key a period's secret gives.
fn key_of(secret: &[u8; SECRET_LEN]) -> LessSafeKey {
    let bytes = derive(secret, b"percore ticket key");
    LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &bytes).expect("a 32-byte AES-256 key"))
}

/// HMAC-SHA256 of `label` under `secret`: one-way, so a later secret gives no
/// earlier one.
fn derive(secret: &[u8; SECRET_LEN], label: &[u8]) -> [u8; SECRET_LEN] {
    let tag = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, secret), label);
    tag.as_ref().try_into().expect("SHA-256's 32 bytes")
}

/// The period `now` is in, counted from the Unix epoch.
fn period_at(now: SystemTime) -> u64 {
    now.duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs() / PERIOD)
}

impl ProducesTickets for TicketKeys {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        PERIOD as u32
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        self.seal_at(plain, SystemTime::now())
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        self.open_at(cipher, SystemTime::now())
    }
}

impl fmt::Debug for TicketKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TicketKeys").field("period", &self.lock().period).finish_non_exhaustive()
    }
}

/// No tickets: a server that resumes no session (`--tls-tickets off`).
#[derive(Debug)]
pub(crate) struct NoTickets;

impl ProducesTickets for NoTickets {
    fn enabled(&self) -> bool {
        false
    }

    fn lifetime(&self) -> u32 {
        0
    }

    fn encrypt(&self, _: &[u8]) -> Option<Vec<u8>> {
        None
    }

    fn decrypt(&self, _: &[u8]) -> Option<Vec<u8>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at(periods: f64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs_f64(periods * PERIOD as f64)
    }

    fn keys_at(period: u64) -> TicketKeys {
        TicketKeys::of(period, [7; SECRET_LEN])
    }

    #[test]
    fn two_processes_with_one_secret_open_each_others_tickets_in_any_later_period() {
        // Forked at period 100; each steps forward on its own, when it is used.
        let (one, other) = (keys_at(100), keys_at(100));
        let ticket = one.seal_at(b"session", at(100.5)).expect("sealed");
        assert_eq!(other.open_at(&ticket, at(100.9)).as_deref(), Some(&b"session"[..]));
        // Much later, stepped by different calls, they still agree.
        let later = one.seal_at(b"later", at(205.2)).expect("sealed");
        assert_eq!(other.open_at(&later, at(205.3)).as_deref(), Some(&b"later"[..]));
    }

    #[test]
    fn a_ticket_opens_in_its_period_and_the_next_and_never_after() {
        let keys = keys_at(10);
        let ticket = keys.seal_at(b"session", at(10.99)).expect("sealed");
        assert_eq!(keys.open_at(&ticket, at(10.99)).as_deref(), Some(&b"session"[..]));
        assert_eq!(keys.open_at(&ticket, at(11.99)).as_deref(), Some(&b"session"[..]));
        assert_eq!(keys.open_at(&ticket, at(12.0)), None);
        // And a fresh process at that time cannot either: the key is gone.
        assert_eq!(keys_at(10).open_at(&ticket, at(12.0)), None);
    }

    #[test]
    fn an_export_goes_on_where_it_was_taken_and_its_secret_opens_nothing_older() {
        let keys = keys_at(50);
        let old = keys.seal_at(b"old", at(50.1)).expect("sealed");
        let new = keys.seal_at(b"new", at(52.1)).expect("sealed");
        let exported = keys.export_at(at(52.1));
        assert_eq!(exported.len(), EXPORT_LEN);
        let imported = TicketKeys::import(&exported).expect("an export");
        assert_eq!(imported.open_at(&new, at(52.2)).as_deref(), Some(&b"new"[..]));
        assert_eq!(imported.open_at(&old, at(50.2)), None);
        assert!(TicketKeys::import(&exported[1..]).is_none());
        assert!(TicketKeys::import(&[exported.clone(), vec![0]].concat()).is_none());
    }

    #[test]
    fn a_ticket_altered_anywhere_or_cut_short_opens_nothing() {
        let keys = keys_at(3);
        let ticket = keys.seal_at(b"session", at(3.5)).expect("sealed");
        for at_byte in 0..ticket.len() {
            let mut altered = ticket.clone();
            altered[at_byte] ^= 1;
            assert_eq!(keys.open_at(&altered, at(3.5)), None, "byte {at_byte}");
            assert_eq!(keys.open_at(&ticket[..at_byte], at(3.5)), None, "cut at {at_byte}");
        }
        // Another secret's keys open none of it.
        assert_eq!(TicketKeys::of(3, [8; SECRET_LEN]).open_at(&ticket, at(3.5)), None);
    }

    #[test]
    fn a_clock_that_goes_back_keeps_the_key_it_had() {
        let keys = keys_at(20);
        let ticket = keys.seal_at(b"session", at(21.5)).expect("sealed");
        assert_eq!(keys.open_at(&ticket, at(19.0)).as_deref(), Some(&b"session"[..]));
    }
}
