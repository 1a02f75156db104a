//! The connection slab: values in reusable slots, named by tokens that carry a
//! generation, so a token of a removed value never reaches the slot's next value.

/// Names one value of a [`Slab`]: the slot index in the low 32 bits, the slot's
/// generation at insertion in the high 32. It is what epoll hands back with an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Token(pub(crate) u64);

impl Token {
    pub(crate) fn new(index: u32, generation: u32) -> Token {
        Token(u64::from(generation) << 32 | u64::from(index))
    }
    pub(crate) fn index(self) -> usize {
        (self.0 & u64::from(u32::MAX)) as usize
    }
    fn generation(self) -> u32 {
        (self.0 >> 32) as u32
    }
}

/// Highest slot index; indices above it are free for the reactor's own tokens
/// (listener, control descriptor), which a slab token can then never equal.
pub(crate) const MAX_INDEX: u32 = u32::MAX - 16;

#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

#[derive(Debug)]
pub(crate) struct Slab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    len: usize,
}

impl<T> Slab<T> {
    pub(crate) fn new() -> Slab<T> {
        Slab { slots: Vec::new(), free: Vec::new(), len: 0 }
    }

    /// Number of values held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Stores `value`, reusing a freed slot when there is one.
    pub(crate) fn insert(&mut self, value: T) -> Token {
        self.len += 1;
        if let Some(index) = self.free.pop() {
            let slot = &mut self.slots[index as usize];
            slot.value = Some(value);
            return Token::new(index, slot.generation);
        }
        let index = self.slots.len() as u32;
        assert!(index <= MAX_INDEX, "connection slab full");
        self.slots.push(Slot { generation: 0, value: Some(value) });
        Token::new(index, 0)
    }

    /// The value `token` names, unless it was removed since.
    pub(crate) fn get_mut(&mut self, token: Token) -> Option<&mut T> {
        let slot = self.slots.get_mut(token.index())?;
        if slot.generation != token.generation() {
            return None;
        }
        slot.value.as_mut()
    }

    /// Removes the value `token` names and retires the token.
    pub(crate) fn remove(&mut self, token: Token) -> Option<T> {
        let slot = self.slots.get_mut(token.index())?;
        if slot.generation != token.generation() {
            return None;
        }
        let value = slot.value.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(token.index() as u32);
        self.len -= 1;
        Some(value)
    }

    /// Tokens of the values for which `matches` is true.
    pub(crate) fn tokens_where(&self, mut matches: impl FnMut(&T) -> bool) -> Vec<Token> {
        let held =
            self.slots.iter().enumerate().filter(|(_, slot)| slot.value.as_ref().is_some_and(&mut matches));
        held.map(|(index, slot)| Token::new(index as u32, slot.generation)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_removed_token_never_names_the_slots_next_value() {
        let mut slab = Slab::new();
        let old = slab.insert("first");
        assert_eq!(slab.remove(old), Some("first"));
        let new = slab.insert("second");
        assert_eq!(new.index(), old.index(), "the slot is reused");
        assert_eq!(slab.get_mut(old), None);
        assert_eq!(slab.remove(old), None);
        assert_eq!(slab.get_mut(new), Some(&mut "second"));
        assert_eq!(slab.len(), 1);
    }

    #[test]
    fn len_returns_to_zero_and_slots_are_reused() {
        let mut slab = Slab::new();
        let tokens: Vec<_> = (0..100).map(|i| slab.insert(i)).collect();
        slab.remove(tokens[0]);
        let odd = slab.tokens_where(|&value| value % 2 == 1);
        assert_eq!(odd.len(), 50);
        assert_eq!(odd[0], tokens[1]);
        for token in slab.tokens_where(|_| true) {
            slab.remove(token);
        }
        assert_eq!(slab.len(), 0);
        for i in 0..100 {
            slab.insert(i);
        }
        assert_eq!(slab.slots.len(), 100, "no slot was added while free ones existed");
    }
}
