//! The `#[tool]` attribute of `skillhost-sdk`.
//!
//! Skill authors use it through `skillhost_sdk::tool` (or the prelude); this
//! crate is an implementation detail and its expansion names only
//! `::skillhost_sdk::__private` items, which may change in any release.
//!
//! `#[tool]` keeps the function as written and emits a hidden sibling module
//! of the same name (functions and modules live in different namespaces)
//! holding `Tool`, `NAME`, `spec()` and `call(input)`, which `skill!` lists.
//! `skill!` implements `Listed` for each listed `Tool`, and `#[tool]` requires
//! it: a tool missing from `skill!` is a compile error at its function.
//!
//! The prelude's `Deserialize`, `Serialize` and `JsonSchema` derives (see
//! [`shadow`](crate::shadow)) run serde's and schemars' derives through the
//! SDK, so a skill needs no direct dependency on either crate.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, FnArg, GenericArgument, ItemFn, Lit, LitStr, Meta, PathArguments, ReturnType, Type, parse_macro_input};

mod shadow;

/// Longest tool name the WIT `tool` record allows, in bytes.
const MAX_NAME_LEN: usize = 64;

/// Turns a function into a tool of the skill.
///
/// ```text
/// /// Count the words in a text.
/// #[tool(read_only, idempotent, example = r#"{"text": "hello world"}"#)]
/// fn word_count(input: CountInput) -> Result<CountOutput, ToolError> { .. }
/// ```
///
/// Options, all optional: `read_only`, `destructive`, `idempotent`,
/// `open_world` (behaviour hints), `name = "..."` (default: the function's
/// name) and `example = "<json>"` (repeatable; each must be a JSON object).
/// The function's doc comment is the tool's description and is required.
/// The function takes at most one argument, the input type
/// (`Deserialize + JsonSchema`), and returns `Result<Output, ToolError>` with
/// `Output: Serialize + JsonSchema`.
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut options = Options::default();
    let parser = syn::meta::parser(|meta| options.parse(meta));
    parse_macro_input!(attr with parser);
    let function = parse_macro_input!(item as ItemFn);
    match expand(options, function.clone()) {
        Ok(tokens) => tokens.into(),
        // Keep the function so its uses do not add errors of their own.
        Err(error) => {
            let error = error.to_compile_error();
            quote! { #error #function }.into()
        }
    }
}

/// `serde::Deserialize`, for a crate that depends on `skillhost-sdk` only.
#[proc_macro_derive(Deserialize, attributes(serde))]
pub fn derive_deserialize(item: TokenStream) -> TokenStream {
    derive(shadow::Derive::Deserialize, item)
}

/// `serde::Serialize`, for a crate that depends on `skillhost-sdk` only.
#[proc_macro_derive(Serialize, attributes(serde))]
pub fn derive_serialize(item: TokenStream) -> TokenStream {
    derive(shadow::Derive::Serialize, item)
}

/// `schemars::JsonSchema`, for a crate that depends on `skillhost-sdk` only.
#[proc_macro_derive(JsonSchema, attributes(schemars, serde, validate, garde))]
pub fn derive_json_schema(item: TokenStream) -> TokenStream {
    derive(shadow::Derive::JsonSchema, item)
}

fn derive(which: shadow::Derive, item: TokenStream) -> TokenStream {
    let input = parse_macro_input!(item as syn::DeriveInput);
    shadow::expand(which, input).unwrap_or_else(|e| e.to_compile_error()).into()
}

/// The parsed arguments of `#[tool(...)]`.
#[derive(Default)]
struct Options {
    name: Option<LitStr>,
    read_only: bool,
    destructive: bool,
    idempotent: bool,
    open_world: bool,
    examples: Vec<LitStr>,
}

impl Options {
    fn parse(&mut self, meta: syn::meta::ParseNestedMeta<'_>) -> syn::Result<()> {
        let flag = |set: &mut bool| {
            if *set {
                return Err(meta.error("option given twice"));
            }
            *set = true;
            Ok(())
        };
        if meta.path.is_ident("read_only") {
            flag(&mut self.read_only)
        } else if meta.path.is_ident("destructive") {
            flag(&mut self.destructive)
        } else if meta.path.is_ident("idempotent") {
            flag(&mut self.idempotent)
        } else if meta.path.is_ident("open_world") {
            flag(&mut self.open_world)
        } else if meta.path.is_ident("name") {
            if self.name.is_some() {
                return Err(meta.error("`name` given twice"));
            }
            self.name = Some(meta.value()?.parse()?);
            Ok(())
        } else if meta.path.is_ident("example") {
            self.examples.push(meta.value()?.parse()?);
            Ok(())
        } else {
            Err(meta.error(
                "unknown tool option: expected `read_only`, `destructive`, `idempotent`, \
                 `open_world`, `name = \"...\"` or `example = \"<json>\"`",
            ))
        }
    }
}

fn expand(options: Options, function: ItemFn) -> syn::Result<TokenStream2> {
    let sig = &function.sig;
    let ident = &sig.ident;
    if let Some(asyncness) = sig.asyncness {
        return Err(syn::Error::new(asyncness.span(), "a tool cannot be `async`"));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        return Err(syn::Error::new(sig.generics.span(), "a tool cannot be generic"));
    }
    if let Some(variadic) = &sig.variadic {
        return Err(syn::Error::new(variadic.span(), "a tool cannot be variadic"));
    }

    let name = match &options.name {
        Some(lit) => (lit.value(), lit.span()),
        None => (ident.to_string().trim_start_matches("r#").to_owned(), ident.span()),
    };
    if let Err(why) = check_name(&name.0) {
        let hint = if options.name.is_none() { "; set another with `#[tool(name = \"...\")]`" } else { "" };
        return Err(syn::Error::new(name.1, format!("invalid tool name `{}`: {why}{hint}", name.0)));
    }
    let name = name.0;

    let description = description(&function.attrs).ok_or_else(|| {
        syn::Error::new(
            ident.span(),
            format!(
                "tool `{name}` needs a doc comment: it is the description an agent reads \
                 to decide when to call the tool"
            ),
        )
    })?;

    let mut examples = Vec::new();
    for example in &options.examples {
        match serde_json::from_str::<serde_json::Value>(&example.value()) {
            Ok(serde_json::Value::Object(_)) => examples.push(example.clone()),
            Ok(_) => {
                return Err(syn::Error::new(example.span(), "an example must be a JSON object"));
            }
            Err(error) => {
                return Err(syn::Error::new(example.span(), format!("example is not valid JSON: {error}")));
            }
        }
    }

    let input_ty = match sig.inputs.len() {
        0 => None,
        1 => match &sig.inputs[0] {
            FnArg::Typed(arg) => Some(&*arg.ty),
            FnArg::Receiver(receiver) => {
                return Err(syn::Error::new(receiver.span(), "a tool is a free function, not a method"));
            }
        },
        _ => {
            return Err(syn::Error::new(sig.inputs.span(), "a tool takes at most one argument: a struct holding all of its inputs"));
        }
    };
    let output_ty = output_type(&sig.output)?;

    let vis = &function.vis;
    let (read_only, destructive) = (options.read_only, options.destructive);
    let (idempotent, open_world) = (options.idempotent, options.open_world);
    let sig_span = sig.span();

    // Bound checks in the function's own scope, spanned to the user's types so
    // a missing derive is reported where it can be fixed.
    let input_check = input_ty.map(|ty| {
        quote_spanned! {ty.span()=>
            let _ = ::skillhost_sdk::__private::assert_input::<#ty>;
        }
    });
    let output_check = quote_spanned! {output_ty.span()=>
        let _ = ::skillhost_sdk::__private::assert_output::<#output_ty>;
    };

    let (input_schema, call) = if input_ty.is_some() {
        (
            quote_spanned! {sig_span=> ::skillhost_sdk::__private::input_schema(super::#ident) },
            quote_spanned! {sig_span=> ::skillhost_sdk::__private::call(super::#ident, input) },
        )
    } else {
        (
            quote! { ::skillhost_sdk::__private::no_input_schema() },
            quote_spanned! {sig_span=> ::skillhost_sdk::__private::call_without_input(super::#ident, input) },
        )
    };
    let output_schema = if input_ty.is_some() {
        quote_spanned! {sig_span=> ::skillhost_sdk::__private::output_schema(super::#ident) }
    } else {
        quote_spanned! {sig_span=> ::skillhost_sdk::__private::output_schema_without_input(super::#ident) }
    };

    // `skill!` implements `Listed` for the marker of each tool it lists: a tool left
    // out fails to compile here, at the function's name.
    let listed_check = quote_spanned! {ident.span()=>
        const _: () = ::skillhost_sdk::__private::assert_listed::<#ident::Tool>();
    };

    Ok(quote! {
        #function

        const _: () = {
            #input_check
            #output_check
        };

        #listed_check

        #[doc(hidden)]
        #vis mod #ident {
            /// Marks the tool; `skill!` implements `Listed` for it.
            pub struct Tool;

            /// The tool's name.
            pub const NAME: &str = #name;

            /// The tool's description, schemas, hints and examples.
            pub fn spec() -> ::skillhost_sdk::__private::ToolSpec {
                ::skillhost_sdk::__private::ToolSpec {
                    name: NAME,
                    description: #description,
                    input_schema: #input_schema,
                    output_schema: #output_schema,
                    annotations: ::skillhost_sdk::__private::Annotations {
                        read_only: #read_only,
                        destructive: #destructive,
                        idempotent: #idempotent,
                        open_world: #open_world,
                    },
                    examples: &[#(#examples),*],
                }
            }

            /// Runs the tool on a JSON input text.
            pub fn call(
                input: &str,
            ) -> ::core::result::Result<::std::string::String, ::skillhost_sdk::__private::CallError> {
                #call
            }
        }
    })
}

/// Checks a tool name against `^[a-z][a-z0-9_-]*$` and the length limit.
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("it is empty".into());
    }
    if name.len() > MAX_NAME_LEN {
        return Err(format!("it is longer than {MAX_NAME_LEN} bytes"));
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err("it must start with a lowercase ASCII letter".into());
    }
    if let Some(c) = name.chars().find(|&c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')) {
        return Err(format!("`{c}` is not allowed (use a-z, 0-9, `_` and `-`)"));
    }
    Ok(())
}

/// Joins the `///` lines of a doc comment, or `None` when there is none.
fn description(attrs: &[syn::Attribute]) -> Option<String> {
    let mut lines = Vec::new();
    for attr in attrs {
        if let Meta::NameValue(nv) = &attr.meta
            && nv.path.is_ident("doc")
            && let Expr::Lit(ExprLit { lit: Lit::Str(s), .. }) = &nv.value
        {
            let value = s.value();
            for line in value.split('\n') {
                lines.push(line.strip_prefix(' ').unwrap_or(line).trim_end().to_owned());
            }
        }
    }
    // Rejoin lines that `///` wrapped: a single line break inside a
    // paragraph is a space, as in Markdown. Blank lines, list items, tables,
    // code fences and indented lines keep their line breaks.
    let mut text = String::new();
    let mut in_fence = false;
    for (i, line) in lines.iter().enumerate() {
        let fence = line.trim_start().starts_with("```");
        let keeps_break = line.is_empty()
            || in_fence
            || fence
            || line.starts_with([' ', '\t', '|', '-', '*', '#'])
            || line.split_once(". ").is_some_and(|(n, _)| n.parse::<u32>().is_ok());
        let previous_blank = i == 0 || lines[i - 1].is_empty() || in_fence;
        if i > 0 {
            text.push(if keeps_break || previous_blank || lines[i - 1].trim_start().starts_with("```") { '\n' } else { ' ' });
        }
        text.push_str(line);
        if fence {
            in_fence = !in_fence;
        }
    }
    let text = text.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

/// The `Output` of a `-> Result<Output, ToolError>` return type.
fn output_type(output: &ReturnType) -> syn::Result<&Type> {
    let error = |span: Span| syn::Error::new(span, "a tool returns `Result<Output, ToolError>`");
    let ReturnType::Type(_, ty) = output else {
        return Err(error(output.span()));
    };
    let Type::Path(path) = &**ty else {
        return Err(error(ty.span()));
    };
    let Some(last) = path.path.segments.last() else {
        return Err(error(ty.span()));
    };
    if last.ident != "Result" {
        return Err(error(ty.span()));
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return Err(error(ty.span()));
    };
    match args.args.first() {
        Some(GenericArgument::Type(output)) => Ok(output),
        _ => Err(error(ty.span())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(check_name("word_count").is_ok());
        assert!(check_name("a-b9").is_ok());
        assert!(check_name("Word").is_err());
        assert!(check_name("9a").is_err());
        assert!(check_name("a.b").is_err());
        assert!(check_name("").is_err());
        assert!(check_name(&"a".repeat(65)).is_err());
        assert!(check_name(&"a".repeat(64)).is_ok());
    }

    #[test]
    fn doc_lines_are_joined_and_trimmed() {
        let f: ItemFn = syn::parse_quote! {
            /// Count the words
            /// in a text.
            ///
            /// Second paragraph:
            /// - one
            /// - two
            fn f() {}
        };
        assert_eq!(description(&f.attrs).unwrap(), "Count the words in a text.\n\nSecond paragraph:\n- one\n- two");
        let g: ItemFn = syn::parse_quote! { fn g() {} };
        assert!(description(&g.attrs).is_none());
    }
}
