//! The three macros that define every type of the format.
//!
//! * `json_object!` — a JSON object with known keys in the reference's order, unknown keys kept
//!   in [`Extra`](crate::Extra), and the read key order kept in [`KeyOrder`](crate::KeyOrder) when
//!   it is not the canonical one. Fields are `req` (absent is a shape error) or `opt` (absent is
//!   `None`; an optional field that may also be `null` has type `Option<T>` inside, so
//!   absent, `null` and a value are three different states).
//! * `json_union!` — objects discriminated by a tag key (`type`, `role`). Unknown tags are kept
//!   as [`UnknownObject`](crate::UnknownObject); a tag that is not the first key is found by
//!   buffering the object (the reference always writes it first).
//! * `open_enum!` — a string enum that keeps unknown values as `Other(String)` (spec §9).
//!
//! Hand-written serde visitors instead of `#[derive]` because derive can neither keep unknown
//! keys in order without `flatten` (which buffers every object and breaks raw values) nor keep
//! a non-canonical key order.

macro_rules! json_object {
    (@ty req $ty:ty) => { $ty };
    (@ty opt $ty:ty) => { Option<$ty> };
    (@emit req $map:ident, $key:expr, $val:expr) => {
        serde::ser::SerializeMap::serialize_entry($map, $key, $val)?;
    };
    (@emit opt $map:ident, $key:expr, $val:expr) => {
        if let Some(v) = $val {
            serde::ser::SerializeMap::serialize_entry($map, $key, v)?;
        }
    };
    (@finish req $local:ident, $key:expr, $err:ty) => {
        match $local {
            Some(v) => v,
            None => return Err(<$err as serde::de::Error>::missing_field($key)),
        }
    };
    (@finish opt $local:ident, $key:expr, $err:ty) => { $local };
    (@required req $vec:ident, $key:expr) => { $vec.push(serde_json::Value::from($key)); };
    (@required opt $vec:ident, $key:expr) => {};
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(
                $(#[$fmeta:meta])*
                $key:literal => $field:ident : $kind:ident $ty:ty
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Default)]
        pub struct $name {
            $(
                $(#[$fmeta])*
                #[doc = concat!("\n\nJSON key `", $key, "` (", stringify!($kind), ").")]
                pub $field: json_object!(@ty $kind $ty),
            )*
            /// Keys this version does not model, kept verbatim in read order.
            pub extra: $crate::raw::Extra,
            /// Key order as read, when not the canonical one (see [`KeyOrder`](crate::KeyOrder)).
            pub key_order: $crate::raw::KeyOrder,
        }

        impl $name {
            /// The JSON keys this type models, in the order the reference writes them.
            pub const KEYS: &'static [&'static str] = &[$($key),*];

            #[allow(unused_assignments, unused_mut, unused_variables)]
            pub(crate) fn serialize_fields<M: serde::ser::SerializeMap>(
                &self,
                map: &mut M,
            ) -> Result<(), M::Error> {
                match &self.key_order.0 {
                    None => {
                        $( json_object!(@emit $kind map, $key, &self.$field); )*
                        for (k, v) in &self.extra.0 {
                            serde::ser::SerializeMap::serialize_entry(map, k, v)?;
                        }
                    }
                    Some(order) => {
                        let mut done: u64 = 0;
                        let mut extra_done = vec![false; self.extra.0.len()];
                        for &slot in order {
                            if slot >= $crate::raw::EXTRA_SLOT {
                                let j = usize::from(slot - $crate::raw::EXTRA_SLOT);
                                if let Some((k, v)) = self.extra.0.get(j) {
                                    if !extra_done[j] {
                                        extra_done[j] = true;
                                        serde::ser::SerializeMap::serialize_entry(map, k, v)?;
                                    }
                                }
                            } else if slot < 64 && done & (1u64 << slot) == 0 {
                                done |= 1u64 << slot;
                                let mut i: u16 = 0;
                                $(
                                    if i == slot {
                                        json_object!(@emit $kind map, $key, &self.$field);
                                    }
                                    i += 1;
                                )*
                            }
                        }
                        let mut i: u16 = 0;
                        $(
                            if done & (1u64 << i) == 0 {
                                json_object!(@emit $kind map, $key, &self.$field);
                            }
                            i += 1;
                        )*
                        for (j, (k, v)) in self.extra.0.iter().enumerate() {
                            if !extra_done[j] {
                                serde::ser::SerializeMap::serialize_entry(map, k, v)?;
                            }
                        }
                    }
                }
                Ok(())
            }

            #[allow(unused_assignments, unused_mut, unused_variables)]
            pub(crate) fn visit_fields<'de, A: serde::de::MapAccess<'de>>(
                map: &mut A,
            ) -> Result<Self, A::Error> {
                $( let mut $field: Option<$ty> = None; )*
                let mut extra: Vec<(String, $crate::raw::RawJson)> = Vec::new();
                let mut order: Option<Vec<u16>> = None;
                let mut last: i32 = -1;
                while let Some(key) = map.next_key::<$crate::raw::Key<'de>>()? {
                    let mut idx: u16 = 0;
                    let mut matched = false;
                    {
                        let k = key.as_str();
                        $(
                            if !matched {
                                if k == $key {
                                    matched = true;
                                    if $field.is_some() {
                                        return Err(<A::Error as serde::de::Error>::duplicate_field($key));
                                    }
                                    $field = Some(map.next_value::<$ty>()?);
                                } else {
                                    idx += 1;
                                }
                            }
                        )*
                    }
                    let slot = if matched {
                        idx
                    } else {
                        let value: $crate::raw::RawJson = map.next_value()?;
                        extra.push((key.into_string(), value));
                        let j = u16::try_from(extra.len() - 1).unwrap_or(u16::MAX - $crate::raw::EXTRA_SLOT);
                        $crate::raw::EXTRA_SLOT.saturating_add(j)
                    };
                    match &mut order {
                        Some(o) => o.push(slot),
                        None => {
                            if matched {
                                if extra.is_empty() && i32::from(idx) > last {
                                    last = i32::from(idx);
                                } else {
                                    // First departure from the canonical order: rebuild the
                                    // order read so far (known keys ascending, then extras).
                                    let mut o: Vec<u16> = Vec::new();
                                    let mut i: u16 = 0;
                                    $(
                                        if i != idx && $field.is_some() {
                                            o.push(i);
                                        }
                                        i += 1;
                                    )*
                                    for j in 0..extra.len() {
                                        let j = u16::try_from(j).unwrap_or(u16::MAX - $crate::raw::EXTRA_SLOT);
                                        o.push($crate::raw::EXTRA_SLOT.saturating_add(j));
                                    }
                                    o.push(slot);
                                    order = Some(o);
                                }
                            }
                        }
                    }
                }
                Ok($name {
                    $( $field: json_object!(@finish $kind $field, $key, A::Error), )*
                    extra: $crate::raw::Extra(extra),
                    key_order: $crate::raw::KeyOrder(order),
                })
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut map = serializer.serialize_map(None)?;
                self.serialize_fields(&mut map)?;
                serde::ser::SerializeMap::end(map)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct ObjectVisitor;
                impl<'de> serde::de::Visitor<'de> for ObjectVisitor {
                    type Value = $name;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str(concat!("an object (", stringify!($name), ")"))
                    }
                    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<$name, A::Error> {
                        $name::visit_fields(&mut map)
                    }
                }
                deserializer.deserialize_map(ObjectVisitor)
            }
        }

        #[cfg(feature = "json-schema")]
        impl $crate::json_schema::Describe for $name {
            fn type_name() -> Option<&'static str> {
                Some(stringify!($name))
            }
            #[allow(unused_mut)]
            fn describe(generator: &mut $crate::json_schema::Generator) -> serde_json::Value {
                let mut props = serde_json::Map::new();
                let mut required: Vec<serde_json::Value> = Vec::new();
                $(
                    props.insert($key.to_owned(), generator.subschema::<$ty>());
                    json_object!(@required $kind required, $key);
                )*
                serde_json::json!({
                    "type": "object",
                    "properties": props,
                    "required": required,
                    "additionalProperties": true,
                })
            }
        }
    };
}

macro_rules! json_union {
    (
        $(#[$meta:meta])*
        pub enum $name:ident tag $tag:literal {
            $(
                $(#[$vmeta:meta])*
                $value:literal => $variant:ident($inner:ty)
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        #[non_exhaustive]
        pub enum $name {
            $(
                $(#[$vmeta])*
                #[doc = concat!("\n\n`", $tag, "` = `\"", $value, "\"`.")]
                $variant($inner),
            )*
            /// A tag value this version does not know, kept with all its fields.
            Unknown($crate::UnknownObject),
        }

        impl $name {
            /// The tag values this version models.
            pub const TAGS: &'static [&'static str] = &[$($value),*];

            /// The tag value (`type`/`role`) of this object as it is written.
            pub fn tag(&self) -> &str {
                match self {
                    $( $name::$variant(_) => $value, )*
                    $name::Unknown(u) => &u.tag,
                }
            }

            pub(crate) fn serialize_fields<M: serde::ser::SerializeMap>(&self, map: &mut M) -> Result<(), M::Error> {
                serde::ser::SerializeMap::serialize_entry(map, $tag, self.tag())?;
                match self {
                    $( $name::$variant(v) => v.serialize_fields(map), )*
                    $name::Unknown(u) => {
                        for (k, v) in &u.fields.0 {
                            serde::ser::SerializeMap::serialize_entry(map, k, v)?;
                        }
                        Ok(())
                    }
                }
            }

            pub(crate) fn visit_variant<'de, A: serde::de::MapAccess<'de>>(
                tag: &str,
                map: &mut A,
            ) -> Result<Self, A::Error> {
                match tag {
                    $( $value => Ok($name::$variant(<$inner>::visit_fields(map)?)), )*
                    _ => {
                        let mut pairs = Vec::new();
                        $crate::raw::buffer_map(map, &mut pairs)?;
                        Ok($name::Unknown($crate::UnknownObject {
                            tag: tag.to_owned(),
                            fields: $crate::raw::Extra(pairs),
                        }))
                    }
                }
            }

            pub(crate) fn visit_union<'de, A: serde::de::MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
                let Some(first) = map.next_key::<$crate::raw::Key<'de>>()? else {
                    return Err(<A::Error as serde::de::Error>::missing_field($tag));
                };
                if first.as_str() == $tag {
                    let tag: $crate::raw::Key<'de> = map.next_value()?;
                    return Self::visit_variant(tag.as_str(), &mut map);
                }
                // The tag is not the first key: buffer the object, then dispatch.
                let mut pairs = vec![(first.into_string(), map.next_value::<$crate::raw::RawJson>()?)];
                $crate::raw::buffer_map(&mut map, &mut pairs)?;
                let Some(pos) = pairs.iter().position(|(k, _)| k == $tag) else {
                    return Err(<A::Error as serde::de::Error>::missing_field($tag));
                };
                let tag: String = pairs[pos].1.parse().map_err(<A::Error as serde::de::Error>::custom)?;
                let mut access = $crate::raw::PairsAccess::new(&pairs, Some(pos));
                Self::visit_variant(&tag, &mut access).map_err(<A::Error as serde::de::Error>::custom)
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut map = serializer.serialize_map(None)?;
                self.serialize_fields(&mut map)?;
                serde::ser::SerializeMap::end(map)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct UnionVisitor;
                impl<'de> serde::de::Visitor<'de> for UnionVisitor {
                    type Value = $name;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str(concat!("an object with a `", $tag, "` key (", stringify!($name), ")"))
                    }
                    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<$name, A::Error> {
                        $name::visit_union(map)
                    }
                }
                deserializer.deserialize_map(UnionVisitor)
            }
        }

        #[cfg(feature = "json-schema")]
        impl $crate::json_schema::Describe for $name {
            fn type_name() -> Option<&'static str> {
                Some(stringify!($name))
            }
            fn describe(generator: &mut $crate::json_schema::Generator) -> serde_json::Value {
                let mut variants: Vec<serde_json::Value> = Vec::new();
                $(
                    variants.push(generator.tagged_variant::<$inner>($tag, $value));
                )*
                serde_json::json!({
                    "x-tag": $tag,
                    "x-open": true,
                    "anyOf": variants,
                })
            }
        }
    };
}

macro_rules! open_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $(
                $(#[$vmeta:meta])*
                $variant:ident = $value:literal
            ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        ///
        /// Unknown values are kept as `Other` and written back unchanged (spec §9).
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum $name {
            $(
                $(#[$vmeta])*
                #[doc = concat!("\n\n`\"", $value, "\"`.")]
                $variant,
            )+
            /// A value this version does not know.
            Other(String),
        }

        impl $name {
            /// The values this version knows.
            pub const KNOWN: &'static [&'static str] = &[$($value),+];

            /// The value as written in JSON.
            pub fn as_str(&self) -> &str {
                match self {
                    $( $name::$variant => $value, )+
                    $name::Other(s) => s,
                }
            }

            /// Whether the value is one this version knows.
            pub fn is_known(&self) -> bool {
                !matches!(self, $name::Other(_))
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                match s {
                    $( $value => $name::$variant, )+
                    other => $name::Other(other.to_owned()),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Default for $name {
            fn default() -> Self {
                $name::from(Self::KNOWN[0])
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let key = $crate::raw::Key::deserialize(deserializer)?;
                Ok($name::from(key.as_str()))
            }
        }

        #[cfg(feature = "json-schema")]
        impl $crate::json_schema::Describe for $name {
            fn type_name() -> Option<&'static str> {
                Some(stringify!($name))
            }
            fn describe(_generator: &mut $crate::json_schema::Generator) -> serde_json::Value {
                serde_json::json!({
                    "anyOf": [ { "enum": [$($value),+] }, { "type": "string" } ],
                    "x-open": true,
                })
            }
        }
    };
}
