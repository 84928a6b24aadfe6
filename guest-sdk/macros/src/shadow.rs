//! The prelude's `Deserialize`, `Serialize` and `JsonSchema` derives.
//!
//! serde's and schemars' own derives name their crates (`extern crate serde`),
//! so they only work in a crate that depends on serde and schemars directly.
//! These derives let a skill depend on `skillhost-sdk` alone: each one
//! copies the type under a hidden name (a *shadow*, keeping only the
//! attributes the real derive reads), runs the real derive on the shadow
//! through the SDK's re-exports, and implements the trait for the original
//! type by delegating to the shadow:
//!
//! - serde: `#[serde(remote = "Original")]` makes the shadow's derive read and
//!   build the original type directly;
//! - schemars: the shadow's schema is the original's, renamed back to the
//!   original's name.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::spanned::Spanned;
use syn::{Attribute, Data, DeriveInput, Fields};

/// Which derive is being shadowed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Derive {
    Deserialize,
    Serialize,
    JsonSchema,
}

impl Derive {
    fn name(self) -> &'static str {
        match self {
            Derive::Deserialize => "Deserialize",
            Derive::Serialize => "Serialize",
            Derive::JsonSchema => "JsonSchema",
        }
    }

    /// Whether the real derive reads an attribute.
    fn keeps(self, attr: &Attribute) -> bool {
        let path = attr.path();
        match self {
            Derive::Deserialize | Derive::Serialize => path.is_ident("serde"),
            Derive::JsonSchema => ["serde", "schemars", "doc", "validate", "garde"].iter().any(|name| path.is_ident(name)),
        }
    }
}

pub(crate) fn expand(derive: Derive, input: DeriveInput) -> syn::Result<TokenStream> {
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new(
            input.generics.span(),
            format!(
                "the prelude's `{0}` does not support generic types; add `{1}` to Cargo.toml and \
                 derive `{1}::{0}` for this type",
                derive.name(),
                if derive == Derive::JsonSchema { "schemars" } else { "serde" },
            ),
        ));
    }
    let original = &input.ident;
    let shadow = format_ident!("__Skillhost{}{}", derive.name(), original);

    let mut item = input.clone();
    item.ident = shadow.clone();
    item.attrs.retain(|a| derive.keeps(a));
    item.vis = syn::Visibility::Inherited;
    match &mut item.data {
        Data::Struct(data) => strip_fields(derive, &mut data.fields),
        Data::Enum(data) => {
            for variant in &mut data.variants {
                variant.attrs.retain(|a| derive.keeps(a));
                strip_fields(derive, &mut variant.fields);
            }
        }
        Data::Union(data) => {
            return Err(syn::Error::new(data.union_token.span(), "unions cannot be derived"));
        }
    }

    let private = quote!(::skillhost_sdk::__private);
    let original_name = original.to_string();
    Ok(match derive {
        Derive::Deserialize => quote! {
            const _: () = {
                #[derive(#private::serde::Deserialize)]
                #[serde(crate = "::skillhost_sdk::__private::serde", remote = #original_name)]
                #[allow(dead_code, non_camel_case_types, clippy::all)]
                #item

                #[automatically_derived]
                impl<'de> #private::serde::Deserialize<'de> for #original {
                    fn deserialize<D>(deserializer: D) -> ::core::result::Result<Self, D::Error>
                    where
                        D: #private::serde::Deserializer<'de>,
                    {
                        #shadow::deserialize(deserializer)
                    }
                }
            };
        },
        Derive::Serialize => quote! {
            const _: () = {
                #[derive(#private::serde::Serialize)]
                #[serde(crate = "::skillhost_sdk::__private::serde", remote = #original_name)]
                #[allow(dead_code, non_camel_case_types, clippy::all)]
                #item

                #[automatically_derived]
                impl #private::serde::Serialize for #original {
                    fn serialize<S>(&self, serializer: S) -> ::core::result::Result<S::Ok, S::Error>
                    where
                        S: #private::serde::Serializer,
                    {
                        #shadow::serialize(self, serializer)
                    }
                }
            };
        },
        Derive::JsonSchema => {
            let renamed = input.attrs.iter().any(renames);
            let rename = (!renamed).then(|| quote!(#[schemars(rename = #original_name)]));
            quote! {
                const _: () = {
                    #[derive(#private::schemars::JsonSchema)]
                    #[schemars(crate = "::skillhost_sdk::__private::schemars")]
                    #rename
                    #[allow(dead_code, non_camel_case_types, clippy::all)]
                    #item

                    #[automatically_derived]
                    impl #private::schemars::JsonSchema for #original {
                        fn inline_schema() -> bool {
                            <#shadow as #private::schemars::JsonSchema>::inline_schema()
                        }

                        fn schema_name() -> ::std::borrow::Cow<'static, str> {
                            <#shadow as #private::schemars::JsonSchema>::schema_name()
                        }

                        fn schema_id() -> ::std::borrow::Cow<'static, str> {
                            <#shadow as #private::schemars::JsonSchema>::schema_id()
                        }

                        fn json_schema(
                            generator: &mut #private::schemars::SchemaGenerator,
                        ) -> #private::schemars::Schema {
                            <#shadow as #private::schemars::JsonSchema>::json_schema(generator)
                        }
                    }
                };
            }
        }
    })
}

/// Keeps only the attributes the real derive reads on each field.
fn strip_fields(derive: Derive, fields: &mut Fields) {
    for field in fields.iter_mut() {
        field.attrs.retain(|a| derive.keeps(a));
        field.vis = syn::Visibility::Inherited;
    }
}

/// Whether a container attribute already names the type for schemars
/// (`#[serde(rename = "...")]` or `#[schemars(rename = "...")]`).
fn renames(attr: &Attribute) -> bool {
    if !(attr.path().is_ident("serde") || attr.path().is_ident("schemars")) {
        return false;
    }
    let mut found = false;
    let _ = attr.parse_nested_meta(|meta| {
        if meta.path.is_ident("rename") {
            found = true;
        }
        // Skip the value of any `key = value` or `key(...)`.
        if meta.input.peek(syn::Token![=]) {
            let _: syn::Expr = meta.value()?.parse()?;
        } else if meta.input.peek(syn::token::Paren) {
            let _ = meta.parse_nested_meta(|_| Ok(()));
        }
        Ok(())
    });
    found
}
