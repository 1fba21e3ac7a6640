//! Verbatim JSON values and ordered unknown fields.
//!
//! Opaque parts of the format (`meta`, `ui_context` extensions, `provider_meta`, `raw_item`,
//! `parameters`, …) and every field a reader does not know are kept as [`RawJson`]: the exact
//! bytes that were read, written back unchanged. This is what makes the byte-exact round trip of
//! `docs/format.md` ("Round trip") possible and what keeps large fields cheap to read.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{DeserializeOwned, Deserializer};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::parsed::Parsed;
use crate::surrogate::{self, LoneSurrogate};

/// One JSON value kept as the exact text it was read from (compact, as found on the line).
///
/// Equality compares the text, so `{"a":1}` and `{ "a": 1 }` differ.
#[derive(Clone)]
pub struct RawJson(Box<RawValue>);

impl RawJson {
    /// The JSON text of the value.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// Wraps JSON text after checking that it is one valid JSON value.
    ///
    /// # Errors
    /// The text is not exactly one JSON value.
    pub fn from_json(text: impl Into<String>) -> Result<Self, serde_json::Error> {
        RawValue::from_string(text.into()).map(RawJson)
    }

    /// Serializes `value` compactly and keeps the text.
    ///
    /// # Errors
    /// `value`'s `Serialize` implementation failed (a map with non-string keys, for example).
    pub fn from_value<T: Serialize + ?Sized>(value: &T) -> Result<Self, serde_json::Error> {
        serde_json::value::to_raw_value(value).map(RawJson)
    }

    /// The JSON literal `null`.
    pub fn null() -> Self {
        RawJson(RawValue::NULL.to_owned())
    }

    /// Parses the text into `T`. Lone surrogate escapes (`\ud83c` without its pair, which
    /// serde_json accepts inside a raw value but not in a `String`) decode as U+FFFD instead of
    /// failing; [`RawJson::parse_reported`] also says which were repaired.
    ///
    /// # Errors
    /// The text does not fit `T`.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        surrogate::decode(self.get()).map(|(value, _)| value)
    }

    /// [`RawJson::parse`], with the lone surrogate escapes that were decoded as U+FFFD
    /// ([`Parsed::lone_surrogates`], offsets within [`RawJson::get`]); [`Parsed::to_json`]
    /// puts them back.
    ///
    /// # Errors
    /// The text does not fit `T`.
    pub fn parse_reported<T: DeserializeOwned>(&self) -> Result<Parsed<T>, serde_json::Error> {
        Ok(match surrogate::decode_repairing(self.get())? {
            (value, None) => Parsed::clean(value),
            (value, Some(r)) => Parsed::repaired(value, &r.text, r.found),
        })
    }

    /// The lone surrogate escapes in the text (offsets within [`RawJson::get`]); empty for every
    /// value read through this crate's line parsers, which repair them.
    pub fn lone_surrogates(&self) -> Vec<LoneSurrogate> {
        let text = self.get();
        if surrogate::may_hold_surrogate_escape(text) {
            surrogate::find_lone_surrogates(text.as_bytes())
        } else {
            Vec::new()
        }
    }

    /// Parses the text into a generic [`serde_json::Value`] (lone surrogate escapes as U+FFFD).
    ///
    /// # Errors
    /// Never for a value read by this crate (the text was checked on the way in); kept fallible
    /// because `Value` rejects numbers outside `f64` range.
    pub fn to_value(&self) -> Result<serde_json::Value, serde_json::Error> {
        self.parse()
    }

    /// Whether the value is the literal `null`.
    pub fn is_null(&self) -> bool {
        self.get() == "null"
    }

    /// Whether the value is a JSON object (`{...}`).
    pub fn is_object(&self) -> bool {
        self.get().starts_with('{')
    }
}

impl fmt::Debug for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RawJson({})", self.get())
    }
}

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl Eq for RawJson {}

impl Default for RawJson {
    fn default() -> Self {
        RawJson::null()
    }
}

impl Serialize for RawJson {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RawJson {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(deserializer).map(RawJson)
    }
}

/// A large nested value kept as raw JSON and decoded into `T` only on demand.
///
/// Used for the fields that dominate run logs (`llm.request.input.messages`,
/// `input.tools`, `llm.response.output.messages`, `header.tools.definitions`): reading a record
/// only validates them, writing it back copies the original bytes, and [`Lazy::parse`] gives the
/// typed value when a caller needs it.
pub struct Lazy<T> {
    raw: RawJson,
    _marker: PhantomData<fn() -> T>,
}

impl<T> Lazy<T> {
    /// Wraps already-valid raw JSON.
    pub fn from_raw(raw: RawJson) -> Self {
        Lazy {
            raw,
            _marker: PhantomData,
        }
    }

    /// The raw JSON text.
    pub fn raw(&self) -> &RawJson {
        &self.raw
    }

    /// The raw JSON text as `&str`.
    pub fn get(&self) -> &str {
        self.raw.get()
    }
}

impl<T: DeserializeOwned> Lazy<T> {
    /// Decodes the value; lone surrogate escapes decode as U+FFFD instead of failing (see
    /// [`RawJson::parse`]), so no message is lost to a cut emoji.
    ///
    /// # Errors
    /// The stored JSON does not fit `T` (for example a message with a wrong field type).
    pub fn parse(&self) -> Result<T, serde_json::Error> {
        self.raw.parse()
    }

    /// [`Lazy::parse`], with the lone surrogate escapes that were repaired
    /// ([`Parsed::lone_surrogates`], offsets within [`Lazy::get`]).
    ///
    /// # Errors
    /// The stored JSON does not fit `T`.
    pub fn parse_reported(&self) -> Result<Parsed<T>, serde_json::Error> {
        self.raw.parse_reported()
    }
}

impl<T: Serialize> Lazy<T> {
    /// Serializes a typed value into its raw form.
    ///
    /// # Errors
    /// `value`'s `Serialize` implementation failed.
    pub fn new(value: &T) -> Result<Self, serde_json::Error> {
        RawJson::from_value(value).map(Lazy::from_raw)
    }
}

impl<T> Clone for Lazy<T> {
    fn clone(&self) -> Self {
        Lazy::from_raw(self.raw.clone())
    }
}

impl<T> PartialEq for Lazy<T> {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw
    }
}

impl<T> fmt::Debug for Lazy<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Lazy({})", self.raw.get())
    }
}

impl<T> Default for Lazy<T> {
    fn default() -> Self {
        Lazy::from_raw(RawJson::null())
    }
}

impl<T> Serialize for Lazy<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.raw.serialize(serializer)
    }
}

impl<'de, T> Deserialize<'de> for Lazy<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        RawJson::deserialize(deserializer).map(Lazy::from_raw)
    }
}

/// Fields of a JSON object that the typed model does not know, in the order they were read.
///
/// They are written back after the known fields (or at their original place, see
/// [`KeyOrder`]), so unknown fields survive a read–modify–write cycle unchanged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extra(pub Vec<(String, RawJson)>);

impl Extra {
    /// Whether there are no unknown fields.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value of an unknown field, if present.
    pub fn get(&self, key: &str) -> Option<&RawJson> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The names of the unknown fields.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_str())
    }
}

/// The order in which an object's keys were read, when it differs from the declared order.
///
/// `None` (the default) means "declared order, then unknown fields": what the reference
/// implementation writes. A non-canonical order is recorded so that re-serialization gives the
/// same bytes; fields set after reading that were absent are written after those recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyOrder(pub(crate) Option<Vec<u16>>);

impl KeyOrder {
    /// Whether the order is the canonical one.
    pub fn is_canonical(&self) -> bool {
        self.0.is_none()
    }
}

/// Marks a slot in a [`KeyOrder`] as an unknown field (index into [`Extra`]).
pub(crate) const EXTRA_SLOT: u16 = 0x100;

/// A map key read without copying where the input allows.
pub(crate) enum Key<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl Key<'_> {
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(s) => s,
            Key::Owned(s) => s,
        }
    }

    pub(crate) fn into_string(self) -> String {
        match self {
            Key::Borrowed(s) => s.to_owned(),
            Key::Owned(s) => s,
        }
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> serde::de::Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key::Borrowed(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key::Owned(v.to_owned()))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Key::Owned(v))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// A `MapAccess` over buffered `(key, raw value)` pairs, used when a union's discriminator is
/// not the first key and the object had to be buffered before the variant was known.
pub(crate) struct PairsAccess<'a> {
    pairs: &'a [(String, RawJson)],
    skip: Option<usize>,
    pos: usize,
}

impl<'a> PairsAccess<'a> {
    pub(crate) fn new(pairs: &'a [(String, RawJson)], skip: Option<usize>) -> Self {
        PairsAccess {
            pairs,
            skip,
            pos: 0,
        }
    }
}

impl<'a> serde::de::MapAccess<'a> for PairsAccess<'a> {
    type Error = serde_json::Error;

    fn next_key_seed<K: serde::de::DeserializeSeed<'a>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Self::Error> {
        if Some(self.pos) == self.skip {
            self.pos += 1;
        }
        match self.pairs.get(self.pos) {
            None => Ok(None),
            Some((key, _)) => seed
                .deserialize(serde::de::value::BorrowedStrDeserializer::new(key))
                .map(Some),
        }
    }

    fn next_value_seed<V: serde::de::DeserializeSeed<'a>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, Self::Error> {
        let Some((_, value)) = self.pairs.get(self.pos) else {
            return Err(serde::de::Error::custom(
                "value requested past the end of the map",
            ));
        };
        self.pos += 1;
        let mut de = serde_json::Deserializer::from_str(value.get());
        seed.deserialize(&mut de)
    }
}

/// Reads every remaining entry of a map into owned pairs.
pub(crate) fn buffer_map<'de, A: serde::de::MapAccess<'de>>(
    map: &mut A,
    pairs: &mut Vec<(String, RawJson)>,
) -> Result<(), A::Error> {
    while let Some(key) = map.next_key::<Key<'de>>()? {
        let value: RawJson = map.next_value()?;
        pairs.push((key.into_string(), value));
    }
    Ok(())
}
