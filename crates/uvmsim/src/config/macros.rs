//! `section!` declares a config section once: the struct (serde, defaults,
//! unknown keys rejected) and its parameter documentation, from the same text.

/// Declare a config section. Every field: doc comment, name (unit in the
/// name), type, `= default`.
macro_rules! section {
    (
        $(#[doc = $sdoc:literal])*
        pub struct $name:ident {
            $(
                $(#[doc = $doc:literal])*
                pub $field:ident : $ty:ty = $default:expr,
            )*
        }
    ) => {
        $(#[doc = $sdoc])*
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(deny_unknown_fields, default)]
        pub struct $name {
            $( $(#[doc = $doc])* pub $field: $ty, )*
        }

        impl Default for $name {
            fn default() -> Self {
                Self { $( $field: $default, )* }
            }
        }

        impl $crate::config::Describe for $name {
            fn describe(path: &str, doc: &str, out: &mut Vec<$crate::config::ParamDoc>) {
                if !path.is_empty() {
                    // The section itself: its field's doc (what it is here), then the struct's (what it models).
                    let own = concat!($($sdoc, " ",)*).trim();
                    let text = if doc.is_empty() || doc == own { own.to_string() } else { format!("{doc} {own}") };
                    out.push($crate::config::ParamDoc {
                        key: path.to_string(),
                        doc: text.split_whitespace().collect::<Vec<_>>().join(" "),
                        section: true,
                    });
                }
                $(
                    <$ty as $crate::config::Describe>::describe(
                        &$crate::config::join_key(path, stringify!($field)),
                        concat!($($doc, " ",)*).trim(),
                        out,
                    );
                )*
            }
        }
    };
}

/// Mark types as config leaves (single values) for documentation.
macro_rules! leaf {
    ($($t:ty),*) => {
        $(impl $crate::config::Describe for $t {
            fn describe(path: &str, doc: &str, out: &mut Vec<$crate::config::ParamDoc>) {
                out.push($crate::config::ParamDoc {
                    key: path.to_string(),
                    doc: doc.split_whitespace().collect::<Vec<_>>().join(" "),
                    section: false,
                });
            }
        })*
    };
}
