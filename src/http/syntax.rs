//! Byte classes of the HTTP grammar (RFC 9110, 5.6.2 and 5.5; RFC 3986 for targets).

/// `tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" /
/// "`" / "|" / "~" / DIGIT / ALPHA`: the bytes of a method or a field name.
pub(crate) fn is_tchar(b: u8) -> bool {
    TCHAR[b as usize]
}

const TCHAR: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'!' | b'#'
                    | b'$'
                    | b'%'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        b += 1;
    }
    table
};

/// A byte of a request target: visible ASCII, or (as nginx allows) bytes above 0x7F;
/// never a space or a control byte.
pub(crate) fn is_target_byte(b: u8) -> bool {
    b > b' ' && b != 0x7f
}

/// `field-value` bytes: visible ASCII, SP, HTAB and obs-text; no other control byte
/// (so no NUL and no CR inside a value).
pub(crate) fn is_value_byte(b: u8) -> bool {
    b >= b' ' && b != 0x7f || b == b'\t'
}

/// Strips optional white space (`OWS = *( SP / HTAB )`) from both ends.
pub(crate) fn trim_ows(mut value: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = value {
        value = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = value {
        value = rest;
    }
    value
}
