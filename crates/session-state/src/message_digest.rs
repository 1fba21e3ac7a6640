//! A 64-bit digest of one message's value, for the save cache: whether the start of a list
//! is still the list this store committed is decided by comparing one digest per message
//! instead of the messages themselves (a whole copy of every cached session's list, read
//! again on every save).
//!
//! The digest is XXH3-64 over an unambiguous encoding of the value as `serde` walks it (the
//! same walk that writes its JSON line, without escaping or formatting): every scalar with a
//! tag byte, every string and byte string with its length, every sequence, map and struct
//! between a start and an end tag, struct fields and enum variants by name. Two messages with
//! the same digest are equal with the certainty the messages file's digest chain gives
//! (`docs/format.md`, XXH3-64) — the same check the save already relies on for the committed
//! bytes of a file.

use serde::ser::{self, Serialize};
use session_schema::BaseMessage;
use xxhash_rust::xxh3::Xxh3;

/// The digest of `message` (see the module docs); `None` when its `Serialize` fails (such a
/// message is never taken from the cache: its save serializes it and fails there).
pub(crate) fn message_digest(message: &BaseMessage) -> Option<u64> {
    let mut walk = Walk(Xxh3::new());
    message.serialize(&mut walk).ok()?;
    Some(walk.0.digest())
}

/// The hashing walk: a `serde` serializer that feeds the encoding to XXH3.
struct Walk(Xxh3);

/// Tags of the encoding.
mod tag {
    pub(super) const BOOL: u8 = 1;
    pub(super) const I64: u8 = 2;
    pub(super) const I128: u8 = 3;
    pub(super) const U64: u8 = 4;
    pub(super) const U128: u8 = 5;
    pub(super) const F32: u8 = 6;
    pub(super) const F64: u8 = 7;
    pub(super) const CHAR: u8 = 8;
    pub(super) const STR: u8 = 9;
    pub(super) const BYTES: u8 = 10;
    pub(super) const NONE: u8 = 11;
    pub(super) const SOME: u8 = 12;
    pub(super) const UNIT: u8 = 13;
    pub(super) const UNIT_STRUCT: u8 = 14;
    pub(super) const UNIT_VARIANT: u8 = 15;
    pub(super) const NEWTYPE_STRUCT: u8 = 16;
    pub(super) const NEWTYPE_VARIANT: u8 = 17;
    pub(super) const SEQ: u8 = 18;
    pub(super) const TUPLE: u8 = 19;
    pub(super) const TUPLE_STRUCT: u8 = 20;
    pub(super) const TUPLE_VARIANT: u8 = 21;
    pub(super) const MAP: u8 = 22;
    pub(super) const STRUCT: u8 = 23;
    pub(super) const STRUCT_VARIANT: u8 = 24;
    pub(super) const SKIPPED: u8 = 25;
    pub(super) const END: u8 = 26;
}

impl Walk {
    fn tag(&mut self, t: u8) {
        self.0.update(&[t]);
    }

    fn bytes(&mut self, t: u8, b: &[u8]) {
        self.0.update(&[t]);
        self.0.update(&(b.len() as u64).to_le_bytes());
        self.0.update(b);
    }

    fn name(&mut self, name: &str) {
        self.bytes(tag::STR, name.as_bytes());
    }

    fn index(&mut self, i: u32) {
        self.0.update(&i.to_le_bytes());
    }
}

/// Errors of the walk: only those a `Serialize` implementation reports itself.
#[derive(Debug)]
struct WalkError(String);

impl std::fmt::Display for WalkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WalkError {}

impl ser::Error for WalkError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        WalkError(msg.to_string())
    }
}

type Done = std::result::Result<(), WalkError>;

impl ser::Serializer for &mut Walk {
    type Ok = ();
    type Error = WalkError;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = Self;
    type SerializeMap = Self;
    type SerializeStruct = Self;
    type SerializeStructVariant = Self;

    fn serialize_bool(self, v: bool) -> Done {
        self.0.update(&[tag::BOOL, u8::from(v)]);
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Done {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i16(self, v: i16) -> Done {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i32(self, v: i32) -> Done {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i64(self, v: i64) -> Done {
        self.tag(tag::I64);
        self.0.update(&v.to_le_bytes());
        Ok(())
    }
    fn serialize_i128(self, v: i128) -> Done {
        self.tag(tag::I128);
        self.0.update(&v.to_le_bytes());
        Ok(())
    }
    fn serialize_u8(self, v: u8) -> Done {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u16(self, v: u16) -> Done {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u32(self, v: u32) -> Done {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u64(self, v: u64) -> Done {
        self.tag(tag::U64);
        self.0.update(&v.to_le_bytes());
        Ok(())
    }
    fn serialize_u128(self, v: u128) -> Done {
        self.tag(tag::U128);
        self.0.update(&v.to_le_bytes());
        Ok(())
    }
    fn serialize_f32(self, v: f32) -> Done {
        self.tag(tag::F32);
        self.0.update(&v.to_le_bytes());
        Ok(())
    }
    fn serialize_f64(self, v: f64) -> Done {
        self.tag(tag::F64);
        self.0.update(&v.to_le_bytes());
        Ok(())
    }
    fn serialize_char(self, v: char) -> Done {
        self.tag(tag::CHAR);
        self.0.update(&u32::from(v).to_le_bytes());
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Done {
        self.bytes(tag::STR, v.as_bytes());
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Done {
        self.bytes(tag::BYTES, v);
        Ok(())
    }
    fn serialize_none(self) -> Done {
        self.tag(tag::NONE);
        Ok(())
    }
    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Done {
        self.tag(tag::SOME);
        value.serialize(self)
    }
    fn serialize_unit(self) -> Done {
        self.tag(tag::UNIT);
        Ok(())
    }
    fn serialize_unit_struct(self, name: &'static str) -> Done {
        self.tag(tag::UNIT_STRUCT);
        self.name(name);
        Ok(())
    }
    fn serialize_unit_variant(self, name: &'static str, index: u32, variant: &'static str) -> Done {
        self.tag(tag::UNIT_VARIANT);
        self.name(name);
        self.index(index);
        self.name(variant);
        Ok(())
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        name: &'static str,
        value: &T,
    ) -> Done {
        self.tag(tag::NEWTYPE_STRUCT);
        self.name(name);
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        value: &T,
    ) -> Done {
        self.tag(tag::NEWTYPE_VARIANT);
        self.name(name);
        self.index(index);
        self.name(variant);
        value.serialize(self)
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self, WalkError> {
        self.tag(tag::SEQ);
        Ok(self)
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self, WalkError> {
        self.tag(tag::TUPLE);
        Ok(self)
    }
    fn serialize_tuple_struct(self, name: &'static str, _len: usize) -> Result<Self, WalkError> {
        self.tag(tag::TUPLE_STRUCT);
        self.name(name);
        Ok(self)
    }
    fn serialize_tuple_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Self, WalkError> {
        self.tag(tag::TUPLE_VARIANT);
        self.name(name);
        self.index(index);
        self.name(variant);
        Ok(self)
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self, WalkError> {
        self.tag(tag::MAP);
        Ok(self)
    }
    fn serialize_struct(self, name: &'static str, _len: usize) -> Result<Self, WalkError> {
        self.tag(tag::STRUCT);
        self.name(name);
        Ok(self)
    }
    fn serialize_struct_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Self, WalkError> {
        self.tag(tag::STRUCT_VARIANT);
        self.name(name);
        self.index(index);
        self.name(variant);
        Ok(self)
    }
}

impl ser::SerializeSeq for &mut Walk {
    type Ok = ();
    type Error = WalkError;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, value: &T) -> Done {
        value.serialize(&mut **self)
    }
    fn end(self) -> Done {
        self.tag(tag::END);
        Ok(())
    }
}

impl ser::SerializeTuple for &mut Walk {
    type Ok = ();
    type Error = WalkError;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, value: &T) -> Done {
        value.serialize(&mut **self)
    }
    fn end(self) -> Done {
        self.tag(tag::END);
        Ok(())
    }
}

impl ser::SerializeTupleStruct for &mut Walk {
    type Ok = ();
    type Error = WalkError;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, value: &T) -> Done {
        value.serialize(&mut **self)
    }
    fn end(self) -> Done {
        self.tag(tag::END);
        Ok(())
    }
}

impl ser::SerializeTupleVariant for &mut Walk {
    type Ok = ();
    type Error = WalkError;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, value: &T) -> Done {
        value.serialize(&mut **self)
    }
    fn end(self) -> Done {
        self.tag(tag::END);
        Ok(())
    }
}

impl ser::SerializeMap for &mut Walk {
    type Ok = ();
    type Error = WalkError;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Done {
        key.serialize(&mut **self)
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, value: &T) -> Done {
        value.serialize(&mut **self)
    }
    fn end(self) -> Done {
        self.tag(tag::END);
        Ok(())
    }
}

impl ser::SerializeStruct for &mut Walk {
    type Ok = ();
    type Error = WalkError;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, key: &'static str, value: &T) -> Done {
        self.name(key);
        value.serialize(&mut **self)
    }
    fn skip_field(&mut self, key: &'static str) -> Done {
        self.tag(tag::SKIPPED);
        self.name(key);
        Ok(())
    }
    fn end(self) -> Done {
        self.tag(tag::END);
        Ok(())
    }
}

impl ser::SerializeStructVariant for &mut Walk {
    type Ok = ();
    type Error = WalkError;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, key: &'static str, value: &T) -> Done {
        self.name(key);
        value.serialize(&mut **self)
    }
    fn skip_field(&mut self, key: &'static str) -> Done {
        self.tag(tag::SKIPPED);
        self.name(key);
        Ok(())
    }
    fn end(self) -> Done {
        self.tag(tag::END);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use session_schema::parse_message;

    fn digest(json: &str) -> u64 {
        message_digest(&parse_message(json.as_bytes()).unwrap().value).unwrap()
    }

    #[test]
    fn equal_messages_share_a_digest_and_any_change_moves_it() {
        let base = r#"{"role":"user","content":"list files"}"#;
        assert_eq!(digest(base), digest(base));
        for other in [
            r#"{"role":"user","content":"list file"}"#,
            r#"{"role":"user","content":"list files","name":"a"}"#,
            r#"{"role":"system","content":"list files"}"#,
            r#"{"role":"user","content":[{"type":"text","text":"list files"}]}"#,
            r#"{"role":"user","content":"list files","x":1}"#,
        ] {
            assert_ne!(digest(base), digest(other), "{other}");
        }
        // Strings are length-prefixed: moving a boundary between two fields is a change.
        assert_ne!(
            digest(r#"{"role":"tool","tool_call_id":"ab","tool_name":"c","content":"x"}"#),
            digest(r#"{"role":"tool","tool_call_id":"a","tool_name":"bc","content":"x"}"#)
        );
        // Unknown fields are kept as raw JSON text and compared as written.
        assert_ne!(
            digest(r#"{"role":"user","content":"hi","x":{"a":1}}"#),
            digest(r#"{"role":"user","content":"hi","x":{"a":2}}"#)
        );
    }
}
