//! What the algorithm and utility-metric registries share: a fixed list of
//! built-in entries, entries a library user adds at run time, and the rule
//! for their names (lower case letters, digits and hyphens, each name once).
//! ARX keeps its extension points the same way: one list per family, looked
//! up by name.

use std::sync::RwLock;

use crate::error::{Error, Result};

/// An entry of a registry: known by its name.
pub(crate) trait Named: Copy + 'static {
    /// The name jobs and reports use.
    fn name(&self) -> &'static str;
}

/// Built-in entries, then those registered at run time.
pub(crate) struct Registry<T: Named> {
    /// The family with its article, for messages: "an algorithm".
    kind: &'static str,
    /// The job setting that names an entry, for messages.
    setting: &'static str,
    built_in: &'static [T],
    registered: RwLock<Vec<T>>,
}

impl<T: Named> Registry<T> {
    /// A registry holding `built_in`.
    pub(crate) const fn new(
        kind: &'static str,
        setting: &'static str,
        built_in: &'static [T],
    ) -> Self {
        Registry {
            kind,
            setting,
            built_in,
            registered: RwLock::new(Vec::new()),
        }
    }

    /// Adds `entry` for the rest of the process.
    ///
    /// # Errors
    /// [`Error::Spec`] when the name is empty, not lower case with hyphens,
    /// or taken.
    pub(crate) fn register(&self, entry: T) -> Result<()> {
        let name = entry.name();
        let kind = self.kind;
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return Err(Error::spec(
                self.setting,
                format!("cannot register `{name}`: {kind}'s name is lower case letters, digits and hyphens"),
            ));
        }
        let mut registered = self.registered.write().unwrap_or_else(|e| e.into_inner());
        if self
            .built_in
            .iter()
            .chain(registered.iter())
            .any(|e| e.name() == name)
        {
            return Err(Error::spec(
                self.setting,
                format!("cannot register `{name}`: {kind} of that name exists"),
            ));
        }
        registered.push(entry);
        Ok(())
    }

    /// Every entry: the built-in ones, then the registered ones.
    pub(crate) fn all(&self) -> Vec<T> {
        let registered = self.registered.read().unwrap_or_else(|e| e.into_inner());
        self.built_in
            .iter()
            .chain(registered.iter())
            .copied()
            .collect()
    }

    /// The entry of that name.
    pub(crate) fn get(&self, name: &str) -> Option<T> {
        self.all().into_iter().find(|e| e.name() == name)
    }
}
