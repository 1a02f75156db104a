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

/// A place of the slab: the value it holds, if any, and the generation the token
/// naming that value carries.
#[derive(Debug)]
struct Versioned<T> {
    generation: u32,
    value: Option<T>,
}

/// Hands out the tokens of a [`Slab`], apart from the slab itself, so that a token
/// can be taken while a value of the slab is borrowed (a callback that opens a
/// connection learns its id at once) and the value placed later.
#[derive(Debug, Default)]
pub(crate) struct Ids {
    /// For each free slot, the token its next value gets.
    free: Vec<Token>,
    /// Slots handed out so far.
    next: u32,
}

impl Ids {
    /// A token no value holds: a freed slot's next one, or a new slot's.
    pub(crate) fn take(&mut self) -> Token {
        if let Some(token) = self.free.pop() {
            return token;
        }
        assert!(self.next <= MAX_INDEX, "connection slab full");
        self.next += 1;
        Token::new(self.next - 1, 0)
    }

    /// Takes back `token`, whose value was removed (or never placed): its slot's
    /// next value gets the next generation, so `token` never names it.
    pub(crate) fn give_back(&mut self, token: Token) {
        self.free.push(Token::new(token.index() as u32, token.generation().wrapping_add(1)));
    }
}

#[derive(Debug)]
pub(crate) struct Slab<T> {
    slots: Vec<Versioned<T>>,
    len: usize,
}

impl<T> Slab<T> {
    pub(crate) fn new() -> Slab<T> {
        Slab { slots: Vec::new(), len: 0 }
    }

    /// Number of values held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Stores `value` under `token`, taken from [`Ids`] and holding nothing.
    pub(crate) fn put(&mut self, token: Token, value: T) {
        let index = token.index();
        if index >= self.slots.len() {
            self.slots.resize_with(index + 1, || Versioned { generation: 0, value: None });
        }
        let slot = &mut self.slots[index];
        debug_assert!(slot.value.is_none(), "a token taken twice");
        slot.generation = token.generation();
        slot.value = Some(value);
        self.len += 1;
    }

    /// The value `token` names, unless it was removed since.
    pub(crate) fn get(&self, token: Token) -> Option<&T> {
        let slot = self.slots.get(token.index())?;
        (slot.generation == token.generation()).then_some(slot.value.as_ref()).flatten()
    }

    /// The value `token` names, unless it was removed since.
    pub(crate) fn get_mut(&mut self, token: Token) -> Option<&mut T> {
        let slot = self.slots.get_mut(token.index())?;
        if slot.generation != token.generation() {
            return None;
        }
        slot.value.as_mut()
    }

    /// The values `a` and `b` name, both at once, unless either was removed (or
    /// they are the same).
    pub(crate) fn pair_mut(&mut self, a: Token, b: Token) -> Option<(&mut T, &mut T)> {
        let (i, j) = (a.index(), b.index());
        if i == j || self.get_mut(a).is_none() || self.get_mut(b).is_none() {
            return None;
        }
        let (low, high) = self.slots.split_at_mut(i.max(j));
        let (first, second) = (&mut low[i.min(j)], &mut high[0]);
        let (first, second) = (first.value.as_mut()?, second.value.as_mut()?);
        Some(if i < j { (first, second) } else { (second, first) })
    }

    /// Removes the value `token` names; the caller gives the token back to [`Ids`].
    pub(crate) fn remove(&mut self, token: Token) -> Option<T> {
        let slot = self.slots.get_mut(token.index())?;
        if slot.generation != token.generation() {
            return None;
        }
        let value = slot.value.take()?;
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

    /// A slab and its ids, used together as the loop uses them.
    fn insert<T>(slab: &mut Slab<T>, ids: &mut Ids, value: T) -> Token {
        let token = ids.take();
        slab.put(token, value);
        token
    }

    fn remove<T>(slab: &mut Slab<T>, ids: &mut Ids, token: Token) -> Option<T> {
        let value = slab.remove(token)?;
        ids.give_back(token);
        Some(value)
    }

    #[test]
    fn a_removed_token_never_names_the_slots_next_value() {
        let (mut slab, mut ids) = (Slab::new(), Ids::default());
        let old = insert(&mut slab, &mut ids, "first");
        assert_eq!(remove(&mut slab, &mut ids, old), Some("first"));
        let new = insert(&mut slab, &mut ids, "second");
        assert_eq!(new.index(), old.index(), "the slot is reused");
        assert_eq!(slab.get_mut(old), None);
        assert_eq!(remove(&mut slab, &mut ids, old), None);
        assert_eq!(slab.get_mut(new), Some(&mut "second"));
        assert_eq!(slab.len(), 1);
        assert_eq!(slab.pair_mut(old, new), None, "a removed token names nothing");
    }

    #[test]
    fn two_values_are_borrowed_at_once_in_the_order_asked() {
        let (mut slab, mut ids) = (Slab::new(), Ids::default());
        let (a, b) = (insert(&mut slab, &mut ids, 'a'), insert(&mut slab, &mut ids, 'b'));
        assert_eq!(slab.pair_mut(a, b), Some((&mut 'a', &mut 'b')));
        assert_eq!(slab.pair_mut(b, a), Some((&mut 'b', &mut 'a')));
        assert_eq!(slab.pair_mut(a, a), None, "one value is not two");
    }

    #[test]
    fn tokens_taken_before_their_values_are_placed_are_distinct_and_placed_in_any_order() {
        let (mut slab, mut ids) = (Slab::new(), Ids::default());
        let (a, b) = (ids.take(), ids.take());
        assert_ne!(a, b);
        slab.put(b, "b");
        assert_eq!(slab.get_mut(a), None, "taken, not placed");
        slab.put(a, "a");
        assert_eq!(slab.get_mut(a), Some(&mut "a"));
        assert_eq!(slab.get_mut(b), Some(&mut "b"));
        // A token given back unplaced (a connect that failed) is not reused as it was.
        let unplaced = ids.take();
        ids.give_back(unplaced);
        let next = ids.take();
        assert_eq!(next.index(), unplaced.index());
        assert_ne!(next, unplaced);
    }

    #[test]
    fn len_returns_to_zero_and_slots_are_reused() {
        let (mut slab, mut ids) = (Slab::new(), Ids::default());
        let tokens: Vec<_> = (0..100).map(|i| insert(&mut slab, &mut ids, i)).collect();
        remove(&mut slab, &mut ids, tokens[0]);
        let odd = slab.tokens_where(|&value| value % 2 == 1);
        assert_eq!(odd.len(), 50);
        assert_eq!(odd[0], tokens[1]);
        for token in slab.tokens_where(|_| true) {
            remove(&mut slab, &mut ids, token);
        }
        assert_eq!(slab.len(), 0);
        for i in 0..100 {
            insert(&mut slab, &mut ids, i);
        }
        assert_eq!(slab.slots.len(), 100, "no slot was added while free ones existed");
    }
}
