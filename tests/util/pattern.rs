//! Bodies whose bytes never repeat, and their comparison: a byte sent from the wrong
//! offset, twice or not at all shows as a difference where it happened, said without
//! printing megabytes.

/// `len` bytes of a xorshift64 stream from `seed`: its 8-byte words never repeat,
/// so no stretch of the body looks like another.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut bytes = Vec::with_capacity(len + 8);
    while bytes.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        bytes.extend_from_slice(&state.to_le_bytes());
    }
    bytes.truncate(len);
    bytes
}

/// Where `got`, due to be `body` from byte `at` on, first differs from it, said
/// without printing megabytes (and, when the bytes there are the body's from
/// elsewhere, from where); None if it is the same.
pub fn difference(got: &[u8], body: &[u8], at: usize) -> Option<String> {
    let due = &body[at.min(body.len())..body.len().min(at + got.len())];
    // memcmp first: the byte-wise search below is slow in a debug build.
    if got == due {
        return None;
    }
    let Some(i) = got.iter().zip(due).position(|(a, b)| a != b) else {
        return Some(format!("{} bytes from body byte {at} on, where {} were due", got.len(), due.len()));
    };
    let window = &got[i..got.len().min(i + 16)];
    let found = body.windows(window.len()).position(|w| w == window);
    let from = found.map_or(String::new(), |offset| format!(" (the body's bytes at {offset})"));
    let due = &due[i..due.len().min(i + 16)];
    Some(format!("body byte {} differs: got {window:02x?}{from}, due {due:02x?}", at + i))
}

/// Asserts `got` is `body`, byte for byte.
pub fn assert_same(got: &[u8], body: &[u8], what: &str) {
    assert_eq!(got.len(), body.len(), "{what}: its length");
    if let Some(difference) = difference(got, body, 0) {
        panic!("{what}: {difference}");
    }
}
