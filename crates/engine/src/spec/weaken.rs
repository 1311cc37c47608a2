//! The no-weakening rule ([`JobSpec::weakenings`]): overrides from the
//! environment, the command line or SQL options may not protect less than
//! the job file they override unless the caller says so on purpose
//! (`--weaken-privacy`, `weaken_privacy = true`). One rule for every front
//! end, so `anonymize('t', config => 'job.toml', k => 2)` is refused like
//! `kanon anonymize --k 2`.

use super::{JobSpec, MissingSensitive, Role};

impl JobSpec {
    /// How `new` protects less than `file`: each weakened privacy setting with
    /// its old and new value (settings only, never data). Empty when `new` is at
    /// least as strict.
    pub fn weakenings(&self, new: &JobSpec) -> Vec<String> {
        let file = self;
        let (a, b) = (&file.privacy, &new.privacy);
        let mut out = Vec::new();
        if b.k < a.k {
            out.push(format!("privacy.k lowered from {} to {}", a.k, b.k));
        }
        match (a.l, b.l) {
            (Some(x), None) => out.push(format!("privacy.l {x} removed")),
            (Some(x), Some(y)) if y < x => out.push(format!("privacy.l lowered from {x} to {y}")),
            _ => {}
        }
        if a.l.is_some() && file.diversity() != new.diversity() {
            out.push(format!(
                "privacy.diversity changed from {:?} to {:?}",
                file.diversity(),
                new.diversity()
            ));
        }
        if let (Some(x), Some(y)) = (a.c, b.c) {
            // Recursive (c,l)-diversity: r1 < c (rl + ... + rm); a larger c admits more.
            if y > x {
                out.push(format!("privacy.c raised from {x} to {y}"));
            }
        }
        if a.l.is_some()
            && a.missing_sensitive == MissingSensitive::Ignore
            && b.missing_sensitive == MissingSensitive::Value
        {
            out.push(
                "privacy.missing_sensitive changed from ignore to value (missing values would count toward l)"
                    .to_string(),
            );
        }
        if new.suppression_limit() > file.suppression_limit() {
            out.push(format!(
                "privacy.suppression_limit raised from {} to {}",
                file.suppression_limit(),
                new.suppression_limit()
            ));
        }
        let (sa, sb) = (file.diversity_columns(), new.diversity_columns());
        if a.l.is_some() {
            for c in sa.iter().filter(|c| !sb.contains(c)) {
                out.push(format!(
                    "sensitive column `{c}` dropped from privacy.sensitive"
                ));
            }
        }
        for r in &a.requirements {
            let shield: std::collections::BTreeSet<&String> = r.shield.iter().collect();
            let kept = b.requirements.iter().any(|q| {
                q.k >= r.k && q.shield.iter().collect::<std::collections::BTreeSet<_>>() == shield
            }) || b.k >= r.k;
            if !kept {
                out.push(format!(
                    "requirement [{}] k = {} dropped or lowered",
                    r.shield.join(", "),
                    r.k
                ));
            }
        }
        let (was, now) = (
            file.privacy.missing_placeholders(),
            new.privacy.missing_placeholders(),
        );
        if a.l.is_some() && was.iter().any(|m| !now.contains(m)) {
            out.push(
                "privacy.missing_values drops a placeholder of the file's (it would count toward l)"
                    .to_string(),
            );
        }
        // A column of the file given another role (an SQL `insensitive =
        // "zip"` over a file's quasi-identifier), or dropped from the
        // attributes, may publish what the file generalises, drops or
        // hashes.
        for a in &file.attributes {
            match new.attributes.iter().find(|b| b.name == a.name) {
                // Stronger: a column published as is gets any other role,
                // or any column is dropped.
                Some(b)
                    if b.role == a.role
                        || a.role == Role::Insensitive
                        || b.role == Role::Identifying => {}
                Some(b) => out.push(format!(
                    "attributes.{}.role changed from {:?} to {:?}",
                    a.name, a.role, b.role
                )),
                None => out.push(format!("attribute `{}` removed", a.name)),
            }
            // Coding and aggregation: a bound moved outwards or removed,
            // or the aggregate changed, publishes other values (any change
            // to microaggregation counts: fail closed).
            if let Some(b) = new.attributes.iter().find(|b| b.name == a.name) {
                let looser = |was: Option<f64>, now: Option<f64>, top: bool| match (was, now) {
                    (Some(_), None) => true,
                    (Some(x), Some(y)) => (top && y > x) || (!top && y < x),
                    _ => false,
                };
                if looser(a.top_code, b.top_code, true) {
                    out.push(format!("attributes.{}.top_code raised or removed", a.name));
                }
                if looser(a.bottom_code, b.bottom_code, false) {
                    out.push(format!(
                        "attributes.{}.bottom_code lowered or removed",
                        a.name
                    ));
                }
                if a.microaggregation.is_some() && a.microaggregation != b.microaggregation {
                    out.push(format!("attributes.{}.microaggregation changed", a.name));
                }
            }
        }
        if file.columns.unlisted != new.columns.unlisted
            && new.columns.unlisted == crate::columns::Unlisted::Insensitive
        {
            out.push(format!(
                "columns.unlisted changed from {:?} to Insensitive (unlisted columns published as they are)",
                file.columns.unlisted
            ));
        }
        if a.entity != b.entity && b.entity.as_deref() == Some(super::privacy::ENTITY_ROW) {
            out.push(format!(
                "privacy.entity changed from {:?} to \"row\" (repeated identifiers would no longer be refused)",
                a.entity.as_deref().unwrap_or("unset")
            ));
        }
        if new.output.unchecked_series == Some(true) && file.output.unchecked_series != Some(true) {
            out.push(
                "output.unchecked_series turned on (a Delta table's versions would not be checked as one release)"
                    .to_string(),
            );
        }
        if file.output.history.is_some() && new.output.history.is_none() {
            out.push(
                "output.history removed (the table's versions would not be checked)".to_string(),
            );
        }
        if b.joinable_pseudonyms && !a.joinable_pseudonyms {
            out.push(
                "privacy.joinable_pseudonyms turned on (releases would join on their pseudonyms)"
                    .to_string(),
            );
        }
        // A registered model's parameters have no order kanon knows: any
        // change to one the file names counts as weakening (fail closed).
        for (name, params) in &a.models {
            match b.models.get(name) {
                None => out.push(format!("privacy.models.{name} removed")),
                Some(p) if p != params => out.push(format!("privacy.models.{name} changed")),
                Some(_) => {}
            }
        }
        out
    }
}
