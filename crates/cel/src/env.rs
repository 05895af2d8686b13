//! Declarations (variables, functions with overloads), type providers and the checking
//! environment, mirroring cel-go v0.29.2 `common/decls` and `checker/env.go`.
//!
//! An [`Env`] is immutable once built. Build a large base environment once (standard library
//! plus extension libraries), put it in an `Arc`, and derive small per-check overlays with
//! [`Env::extend`]: an overlay adds variables, functions and type providers without copying the
//! base.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use super::types::{Type, TypeKind};

/// One overload of a function: its id, argument types (receiver first for member overloads)
/// and result type. Type parameters are the `TypeParam` types it mentions.
#[derive(Clone, Debug, PartialEq)]
pub struct OverloadDecl {
    id: Arc<str>,
    arg_types: Vec<Type>,
    result_type: Type,
    is_member: bool,
    type_params: Vec<Arc<str>>,
}

impl OverloadDecl {
    /// A global overload, called as `f(args...)`.
    pub fn global(id: impl Into<Arc<str>>, arg_types: Vec<Type>, result_type: Type) -> Self {
        Self::new(id.into(), arg_types, result_type, false)
    }

    /// A member (receiver-style) overload, called as `args[0].f(args[1..]...)`;
    /// `arg_types[0]` is the receiver type.
    pub fn member(id: impl Into<Arc<str>>, arg_types: Vec<Type>, result_type: Type) -> Self {
        Self::new(id.into(), arg_types, result_type, true)
    }

    fn new(id: Arc<str>, arg_types: Vec<Type>, result_type: Type, is_member: bool) -> Self {
        // cel-go collects the names into a Go map (result type first, then the arguments) and
        // iterates it, so its order is random; insertion order is the most likely one.
        let mut type_params = Vec::new();
        for t in std::iter::once(&result_type).chain(arg_types.iter()) {
            collect_type_params(t, &mut type_params);
        }
        Self {
            id,
            arg_types,
            result_type,
            is_member,
            type_params,
        }
    }

    /// The overload id, e.g. `add_int64`.
    pub fn id(&self) -> &str {
        &self.id
    }
    /// The argument types, receiver first for member overloads.
    pub fn arg_types(&self) -> &[Type] {
        &self.arg_types
    }
    /// The result type.
    pub fn result_type(&self) -> &Type {
        &self.result_type
    }
    /// Whether this is a receiver-style overload.
    pub fn is_member(&self) -> bool {
        self.is_member
    }
    /// The names of the type parameters used by the signature, in order of appearance.
    pub fn type_params(&self) -> &[Arc<str>] {
        &self.type_params
    }

    fn same_signature(&self, other: &OverloadDecl) -> bool {
        self.is_member == other.is_member
            && self.arg_types.len() == other.arg_types.len()
            && self
                .arg_types
                .iter()
                .zip(&other.arg_types)
                .all(|(a, b)| a.is_exact(b))
            && self.result_type.is_exact(&other.result_type)
    }
}

fn collect_type_params(t: &Type, out: &mut Vec<Arc<str>>) {
    if let TypeKind::TypeParam(n) = t.type_kind() {
        if !out.contains(n) {
            out.push(n.clone());
        }
        return;
    }
    for i in 0..t.param_count() {
        if let Some(p) = t.param(i) {
            collect_type_params(p, out);
        }
    }
}

/// A function: a name and its overloads, in declaration order (the order matters for the
/// result type of a call, as in cel-go).
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionDecl {
    name: Arc<str>,
    overloads: Vec<OverloadDecl>,
}

impl FunctionDecl {
    /// A function with the given overloads.
    pub fn new(name: impl Into<Arc<str>>, overloads: Vec<OverloadDecl>) -> Self {
        Self {
            name: name.into(),
            overloads,
        }
    }
    /// The function name (an operator such as `_+_`, or a name such as `size` or `optional.of`).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The overloads in declaration order.
    pub fn overloads(&self) -> &[OverloadDecl] {
        &self.overloads
    }

    /// Merges the overloads of `other` into this function. An overload id that already exists
    /// must have the same signature (then it is skipped); otherwise it is an error.
    pub fn merge(&mut self, other: &FunctionDecl) -> Result<(), EnvError> {
        for o in &other.overloads {
            match self.overloads.iter().find(|x| x.id == o.id) {
                Some(existing) if existing.same_signature(o) => {}
                Some(_) => {
                    return Err(EnvError(format!(
                        "overload redefinition in function. {}: {} has multiple definitions",
                        self.name, o.id
                    )));
                }
                None => self.overloads.push(o.clone()),
            }
        }
        Ok(())
    }
}

/// A hasher for short identifier keys (FNV-1a): the keys are declaration names chosen by
/// the program, not by an attacker, so a keyed hash buys nothing and costs time.
#[derive(Default)]
pub struct FnvHasher(u64);

impl Hasher for FnvHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

/// A `HashMap` with [`FnvHasher`].
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FnvHasher>>;

/// A hasher that takes its input a word (8 bytes) at a time (the multiply-and-rotate of
/// rustc's `FxHasher`), for the cost estimator's maps (`cel::cost`): [`FnvHasher`] takes one
/// byte per multiply, which showed in the estimator's profile (docs/cost.md). Only for maps
/// whose iteration order nothing observes (lookups only): the order differs from a
/// [`FastMap`]'s.
#[derive(Default)]
pub struct WordHasher(u64);

impl WordHasher {
    const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(Self::SEED);
    }
}

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        // The low bits pick the bucket: bring the well-mixed high bits down.
        self.0.rotate_left(26)
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            self.add(u64::from_le_bytes(b));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(b));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
}

/// A `HashMap` with [`WordHasher`] (lookups only; see there).
pub type WordMap<K, V> = HashMap<K, V, BuildHasherDefault<WordHasher>>;

/// An error while building an environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvError(pub String);

impl fmt::Display for EnvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EnvError {}

/// Knows object (struct) types and their fields, as cel-go's `types.Provider` does for the
/// checker. Implemented by OpenAPI-schema-derived type sets and by hand-built ones.
pub trait TypeProvider: Send + Sync {
    /// The object type called `name` (normally `Type::object(name)`), if this provider knows it.
    fn find_struct_type(&self, name: &str) -> Option<Type>;

    /// The type of field `field` of the object type `struct_name`. `None` makes the checker
    /// report `undefined field '<field>'`.
    fn find_struct_field_type(&self, struct_name: &str, field: &str) -> Option<Type>;

    /// A non-object type denoted by the identifier `name` (used as `type(T)`), if any.
    fn find_ident(&self, _name: &str) -> Option<Type> {
        None
    }

    /// Whether an expression may refer to the object type `name` by name (as an identifier,
    /// `type(T)`, or in a message literal `T{...}`). Types that exist only to describe values
    /// (Kubernetes names its schema types `<Kind><random digits>`, which no expression can
    /// know) answer `false`; field selection on their values still works.
    fn is_nameable(&self, _name: &str) -> bool {
        true
    }
}

/// A simple [`TypeProvider`] holding hand-built object types and their fields.
#[derive(Clone, Debug, Default)]
pub struct StructTypes {
    types: FastMap<String, FastMap<String, Type>>,
}

impl StructTypes {
    /// An empty set of object types.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the object type `name` with the given fields.
    pub fn add_type<N: Into<String>>(
        &mut self,
        name: &str,
        fields: impl IntoIterator<Item = (N, Type)>,
    ) {
        self.types.insert(
            name.to_string(),
            fields.into_iter().map(|(n, t)| (n.into(), t)).collect(),
        );
    }

    /// The fields of the object type `name` with their types, sorted by name; `None` when
    /// it holds no such type (for listing them, e.g. an editor's completion).
    pub fn fields(&self, name: &str) -> Option<Vec<(&str, &Type)>> {
        let mut out: Vec<(&str, &Type)> = self
            .types
            .get(name)?
            .iter()
            .map(|(n, t)| (n.as_str(), t))
            .collect();
        out.sort_by_key(|f| f.0);
        Some(out)
    }

    /// Builder-style [`StructTypes::add_type`].
    pub fn with_type<N: Into<String>>(
        mut self,
        name: &str,
        fields: impl IntoIterator<Item = (N, Type)>,
    ) -> Self {
        self.add_type(name, fields);
        self
    }
}

impl TypeProvider for StructTypes {
    fn find_struct_type(&self, name: &str) -> Option<Type> {
        self.types.contains_key(name).then(|| Type::object(name))
    }

    fn find_struct_field_type(&self, struct_name: &str, field: &str) -> Option<Type> {
        self.types.get(struct_name)?.get(field).cloned()
    }
}

/// Options of an environment (the cel-go `EnvOption`s that matter for checking).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EnvOptions {
    /// cel-go `CrossTypeNumericComparisons(true)`: allows `_<_` etc. between int, uint and
    /// double. When off, those overloads are filtered out (but see the comprehension quirk in
    /// `docs/cel-checker.md`).
    pub cross_type_numeric_comparisons: bool,
    /// cel-go `OptionalTypes()`: declare the optional library. Only used by
    /// [`EnvBuilder::standard`]; parsing always accepts the optional syntax.
    pub optional_types: bool,
    /// cel-go `HomogeneousAggregateLiterals()`: run the homogeneous aggregate literal validator.
    pub homogeneous_aggregate_literals: bool,
    /// cel-go `DefaultUTCTimeZone(true)`. Runtime-only in cel-go; kept for completeness, it has
    /// no effect on checking.
    pub default_utc_time_zone: bool,
    /// Run the duration literal validator (`cel.ValidateDurationLiterals()`).
    pub validate_duration_literals: bool,
    /// Run the timestamp literal validator (`cel.ValidateTimestampLiterals()`).
    pub validate_timestamp_literals: bool,
    /// Run the regex literal validator (`cel.ValidateRegexLiterals()`).
    pub validate_regex_literals: bool,
    /// Functions whose arguments are exempt from the homogeneous literal validator
    /// (cel-go `HomogeneousAggregateLiteralExemptFunctions`; the strings extension adds
    /// `format`).
    pub homogeneous_exempt_functions: Vec<String>,
    /// The container (namespace) for name resolution; empty by default.
    pub container: String,
}

impl EnvOptions {
    /// The options Kubernetes uses for admission policies (cross-type numeric comparisons,
    /// optional types, default UTC time zone and the four AST validators).
    pub fn kubernetes() -> Self {
        Self {
            cross_type_numeric_comparisons: true,
            optional_types: true,
            homogeneous_aggregate_literals: true,
            default_utc_time_zone: true,
            validate_duration_literals: true,
            validate_timestamp_literals: true,
            validate_regex_literals: true,
            homogeneous_exempt_functions: Vec::new(),
            container: String::new(),
        }
    }
}

/// A call-shaped macro the checker types itself (the `cel` parser leaves calls such as
/// two-variable `all`, `transformList` or `optMap` unexpanded). See
/// [`crate::macros::CallMacro`].
pub use super::macros::CallMacro;

/// A checking environment. Immutable; cheap to share in an `Arc`; overlays reference their
/// base instead of copying it.
pub struct Env {
    base: Option<Arc<Env>>,
    idents: FastMap<String, Type>,
    functions: FastMap<String, Arc<FunctionDecl>>,
    providers: Vec<Arc<dyn TypeProvider>>,
    call_macros: FastMap<String, Arc<dyn CallMacro>>,
    options: EnvOptions,
}

impl fmt::Debug for Env {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Env")
            .field("has_base", &self.base.is_some())
            .field("idents", &self.idents.len())
            .field("functions", &self.functions.len())
            .field("providers", &self.providers.len())
            .field("options", &self.options)
            .finish()
    }
}

impl Env {
    /// A builder for an environment with no declarations at all.
    pub fn builder() -> EnvBuilder {
        EnvBuilder::empty(EnvOptions::default())
    }

    /// An overlay builder on top of `base`: inherits everything (options included) without
    /// copying it.
    pub fn extend(base: &Arc<Env>) -> EnvBuilder {
        EnvBuilder {
            env: Env {
                base: Some(base.clone()),
                idents: FastMap::default(),
                functions: FastMap::default(),
                providers: Vec::new(),
                call_macros: FastMap::default(),
                options: base.options.clone(),
            },
        }
    }

    /// The options in force.
    pub fn options(&self) -> &EnvOptions {
        &self.options
    }

    /// The declared type of the global identifier `name`.
    pub fn find_ident(&self, name: &str) -> Option<&Type> {
        let mut env = self;
        loop {
            if let Some(t) = env.idents.get(name) {
                return Some(t);
            }
            env = env.base.as_deref()?;
        }
    }

    /// The function `name` (with every overload declared in this env and its bases).
    pub fn find_function(&self, name: &str) -> Option<&FunctionDecl> {
        let mut env = self;
        loop {
            if let Some(f) = env.functions.get(name) {
                return Some(f);
            }
            env = env.base.as_deref()?;
        }
    }

    /// Every function of this environment and its bases, sorted by name (for a name declared
    /// in an overlay and a base, the overlay's declaration, which [`Env::find_function`]
    /// answers); for listing them, e.g. an editor's completion.
    pub fn functions(&self) -> Vec<&FunctionDecl> {
        let mut names: Vec<&str> = Vec::new();
        let mut env = Some(self);
        while let Some(e) = env {
            names.extend(e.functions.keys().map(String::as_str));
            env = e.base.as_deref();
        }
        names.sort_unstable();
        names.dedup();
        names
            .into_iter()
            .filter_map(|n| self.find_function(n))
            .collect()
    }

    /// The call-shaped macro registered for `name`, if any.
    pub fn find_call_macro(&self, name: &str) -> Option<&Arc<dyn CallMacro>> {
        let mut env = self;
        loop {
            if let Some(m) = env.call_macros.get(name) {
                return Some(m);
            }
            env = env.base.as_deref()?;
        }
    }

    /// The object type `name` from the first provider (overlay first) that knows it.
    pub fn find_struct_type(&self, name: &str) -> Option<Type> {
        self.find_struct_provider(name).map(|(_, t)| t)
    }

    /// [`Env::find_struct_type`] for a type an expression names (see
    /// [`TypeProvider::is_nameable`]).
    pub fn find_nameable_struct_type(&self, name: &str) -> Option<Type> {
        self.find_struct_provider(name)
            .filter(|(p, _)| p.is_nameable(name))
            .map(|(_, t)| t)
    }

    fn find_struct_provider(&self, name: &str) -> Option<(&dyn TypeProvider, Type)> {
        let mut env = self;
        loop {
            for p in &env.providers {
                if let Some(t) = p.find_struct_type(name) {
                    return Some((p.as_ref(), t));
                }
            }
            env = env.base.as_deref()?;
        }
    }

    /// The type of `field` on the object type `struct_name`, asked of the provider that knows
    /// the type. Outer `None`: the type is unknown; inner `None`: the field is undefined.
    pub fn find_struct_field_type(&self, struct_name: &str, field: &str) -> Option<Option<Type>> {
        let (p, _) = self.find_struct_provider(struct_name)?;
        Some(p.find_struct_field_type(struct_name, field))
    }

    /// A provider-level identifier (`find_ident`) from any provider, overlay first.
    pub fn find_provider_ident(&self, name: &str) -> Option<Type> {
        let mut env = self;
        loop {
            for p in &env.providers {
                if let Some(t) = p.find_ident(name) {
                    return Some(t);
                }
            }
            env = env.base.as_deref()?;
        }
    }

    /// The candidate names for `name` in the container, most qualified first
    /// (cel-go `containers.Container.ResolveCandidateNames`).
    pub fn candidate_names(&self, name: &str) -> Vec<String> {
        if let Some(stripped) = name.strip_prefix('.') {
            return vec![stripped.to_string()];
        }
        let container = &self.options.container;
        if container.is_empty() {
            return vec![name.to_string()];
        }
        let mut out = Vec::new();
        let mut prefix = container.as_str();
        loop {
            out.push(format!("{prefix}.{name}"));
            match prefix.rfind('.') {
                Some(i) => prefix = &prefix[..i],
                None => break,
            }
        }
        out.push(name.to_string());
        out
    }
}

/// Builds an [`Env`].
pub struct EnvBuilder {
    env: Env,
}

impl EnvBuilder {
    pub(crate) fn empty(options: EnvOptions) -> Self {
        EnvBuilder {
            env: Env {
                base: None,
                idents: FastMap::default(),
                functions: FastMap::default(),
                providers: Vec::new(),
                call_macros: FastMap::default(),
                options,
            },
        }
    }

    /// Replaces the options.
    pub fn options(mut self, options: EnvOptions) -> Self {
        self.env.options = options;
        self
    }

    /// Mutable access to the options.
    pub fn options_mut(&mut self) -> &mut EnvOptions {
        &mut self.env.options
    }

    /// Declares a global variable. Redeclaring a name with an equivalent type is accepted; a
    /// different type is an error (`overlapping identifier for name '<name>'`, as cel-go).
    pub fn add_variable(&mut self, name: &str, t: Type) -> Result<&mut Self, EnvError> {
        let existing = self.env.idents.get(name);
        if let Some(old) = existing
            && !old.is_equivalent(&t)
        {
            return Err(EnvError(format!(
                "overlapping identifier for name '{name}'"
            )));
        }
        self.env.idents.insert(name.to_string(), t);
        Ok(self)
    }

    /// Builder-style [`EnvBuilder::add_variable`].
    pub fn variable(mut self, name: &str, t: Type) -> Result<Self, EnvError> {
        self.add_variable(name, t)?;
        Ok(self)
    }

    /// Declares a function, merging overloads into any function of the same name already
    /// visible (in this builder or the base env).
    pub fn add_function(&mut self, f: FunctionDecl) -> Result<&mut Self, EnvError> {
        let name = f.name().to_string();
        let merged = match self.env.functions.get(&name) {
            Some(existing) => {
                let mut m = (**existing).clone();
                m.merge(&f)?;
                m
            }
            None => match self
                .env
                .base
                .as_deref()
                .and_then(|b| b.find_function(&name))
            {
                Some(existing) => {
                    let mut m = existing.clone();
                    m.merge(&f)?;
                    m
                }
                None => f,
            },
        };
        self.env.functions.insert(name, Arc::new(merged));
        Ok(self)
    }

    /// Builder-style [`EnvBuilder::add_function`].
    pub fn function(mut self, f: FunctionDecl) -> Result<Self, EnvError> {
        self.add_function(f)?;
        Ok(self)
    }

    /// Adds a type provider. Providers added later, and overlay providers, are consulted
    /// after earlier ones of the same env but before those of the base env.
    pub fn add_provider(&mut self, p: Arc<dyn TypeProvider>) -> &mut Self {
        self.env.providers.push(p);
        self
    }

    /// Builder-style [`EnvBuilder::add_provider`].
    pub fn provider(mut self, p: Arc<dyn TypeProvider>) -> Self {
        self.add_provider(p);
        self
    }

    /// Registers a call-shaped macro checked by custom logic (see [`CallMacro`]).
    pub fn add_call_macro(&mut self, m: Arc<dyn CallMacro>) -> &mut Self {
        self.env.call_macros.insert(m.name().to_string(), m);
        self
    }

    /// Whether a variable called `name` is declared in this builder (not the base).
    pub fn has_variable(&self, name: &str) -> bool {
        self.env.idents.contains_key(name)
    }

    /// Finishes the environment.
    pub fn build(self) -> Env {
        self.env
    }
}

#[cfg(test)]
mod word_hasher_tests {
    use std::hash::{BuildHasher, BuildHasherDefault};

    use super::{WordHasher, WordMap};

    fn hash(s: &str) -> u64 {
        BuildHasherDefault::<WordHasher>::default().hash_one(s)
    }

    #[test]
    fn words_and_their_tails_all_count() {
        // Names that differ only in their last, partial word, or past the first word.
        assert_ne!(hash("containers"), hash("containerz"));
        assert_ne!(hash("spec.template.spec"), hash("spec.template.spex"));
        assert_ne!(hash("abcdefgh"), hash("abcdefghi"));
        assert_ne!(hash(""), hash("a"));
    }

    #[test]
    fn a_map_finds_every_key() {
        let keys: Vec<String> = (0..2000).map(|i| format!("field{i}")).collect();
        let map: WordMap<String, usize> = keys.iter().cloned().zip(0..).collect();
        assert_eq!(map.len(), keys.len());
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(map.get(k.as_str()), Some(&i));
        }
        assert_eq!(map.get("field2000"), None);
    }
}
