//! Checking a job before any data is read ([`JobSpec::validate`]): roles,
//! k, limits, algorithm names and the l-diversity settings, each error
//! naming the setting at fault.

use super::{Diversity, JobSpec, Role};
use crate::error::{Error, Result};

impl JobSpec {
    /// [`Error::Spec`] naming the setting.
    pub fn validate(&self) -> Result<()> {
        // Every model of `[privacy.models]` is registered and its
        // parameters build.
        let models = crate::privacy::registry::build_all(self)?;
        // A model that bounds every record's risk on its own (an
        // average-risk or uniqueness threshold, k-map) may stand without k.
        let protected_by_a_model = models.iter().any(|m| m.protects_alone());
        if self.privacy.k == 0 && self.privacy.requirements.is_empty() && !protected_by_a_model {
            return Err(Error::spec(
                "privacy.k",
                "give k (at least 2), `privacy.requirements`, or a risk model such as `[privacy.models.average-risk]`",
            ));
        }
        if let Some(s) = self.privacy.suppression_limit {
            if !(0.0..=1.0).contains(&s) {
                return Err(Error::spec(
                    "privacy.suppression_limit",
                    "must be a share between 0 and 1 (e.g. 0.02 for 2 %)",
                ));
            }
        }
        self.validate_diversity()?;
        self.validate_entity()?;
        self.risk.validate()?;
        let strongest = self
            .privacy
            .requirements
            .iter()
            .map(|r| r.k)
            .chain([self.privacy.k, self.privacy.l.unwrap_or(0)])
            .max()
            .unwrap_or(0);
        // (A requirement of k = 0 is refused with its own message by
        // `Privacy::from_spec`.)
        if strongest < 2
            && !protected_by_a_model
            && self.privacy.requirements.iter().all(|r| r.k > 0)
        {
            return Err(Error::spec(
                "privacy.k",
                format!(
                    "k = {} protects nobody (every record may be a class of its own); set k >= 2 (or l >= 2 for l-diversity alone, or a risk model such as `[privacy.models.average-risk]`)",
                    self.privacy.k
                ),
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for a in &self.attributes {
            if !seen.insert(a.name.as_str()) {
                return Err(Error::spec(
                    format!("attributes.{}", a.name),
                    "listed more than once",
                ));
            }
            a.generalisation()?;
            a.check_generalisation_role()?;
            a.check_transformations()?;
            if a.key_env.is_some() && a.role != Role::Pseudonymised {
                return Err(Error::spec(
                    format!("attributes.{}.key_env", a.name),
                    "only applies to `role = \"pseudonymised\"`",
                ));
            }
            if a.key_env.as_deref().is_some_and(|v| v.trim().is_empty()) {
                return Err(Error::spec(
                    format!("attributes.{}.key_env", a.name),
                    "name an environment variable, e.g. key_env = \"KANON_PSEUDONYM_KEY\"",
                ));
            }
            if let Some(var) = a.key_env.as_deref().filter(|v| is_common_variable(v)) {
                return Err(Error::spec(
                    format!("attributes.{}.key_env", a.name),
                    format!(
                        "{var} is a common environment variable, whose value is no secret (anyone can guess it and recompute every pseudonym); name a variable that holds only the key, e.g. key_env = \"KANON_PSEUDONYM_KEY\""
                    ),
                ));
            }
            if !a.windows.is_empty() {
                let setting = format!("attributes.{}.windows", a.name);
                if a.intervals.is_none() && a.cuts.is_none() {
                    return Err(Error::spec(
                        setting,
                        "windows are runs of a numeric quasi-identifier's finest intervals: give `intervals` (e.g. [5, 10, 20]) or `cuts` too, or remove `windows`",
                    ));
                }
                if a.windows.iter().any(|&w| w < 2) {
                    return Err(Error::spec(
                        setting,
                        "every window spans at least 2 finest intervals (e.g. windows = [2, 3, 4])",
                    ));
                }
            }
            if let Some(w) = a.weight {
                if !(w >= 0.0 && w.is_finite()) {
                    return Err(Error::spec(
                        format!("attributes.{}.weight", a.name),
                        "must be >= 0",
                    ));
                }
            }
        }
        if self.quasi_identifiers().next().is_none() {
            return Err(Error::spec(
                "attributes",
                "no quasi-identifier: give at least one attribute with role = \"quasi-identifier\"",
            ));
        }
        for (i, r) in self.privacy.requirements.iter().enumerate() {
            let setting = format!("privacy.requirements[{i}]");
            if r.k < 1 {
                return Err(Error::spec(format!("{setting}.k"), "k must be at least 1"));
            }
            if r.shield.is_empty() {
                return Err(Error::spec(
                    format!("{setting}.shield"),
                    "name at least one quasi-identifier",
                ));
            }
            let mut seen = std::collections::HashSet::new();
            for name in &r.shield {
                if self.role_of(name) != Role::QuasiIdentifier {
                    let qis: Vec<&str> =
                        self.quasi_identifiers().map(|a| a.name.as_str()).collect();
                    return Err(Error::spec(
                        format!("{setting}.shield"),
                        format!(
                            "`{name}` is not a quasi-identifier of the job; a shield names quasi-identifiers only ([{}])",
                            qis.join(", ")
                        ),
                    ));
                }
                if !seen.insert(name.as_str()) {
                    return Err(Error::spec(
                        format!("{setting}.shield"),
                        format!("`{name}` is listed more than once"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Checks the l-diversity settings of `[privacy]`.
    fn validate_diversity(&self) -> Result<()> {
        let p = &self.privacy;
        let Some(l) = p.l else {
            for (given, name) in [
                (p.diversity.is_some(), "diversity"),
                (p.c.is_some(), "c"),
                (p.sensitive.is_some(), "sensitive"),
            ] {
                if given {
                    return Err(Error::spec(
                        format!("privacy.{name}"),
                        "only applies to l-diversity: set `l` as well (e.g. `l = 3`)",
                    ));
                }
            }
            return Ok(());
        };
        if l < 2 {
            return Err(Error::spec(
                "privacy.l",
                format!(
                    "l = {l} is no l-diversity (every class holds at least one sensitive value), so a certificate would claim a protection the release does not have; set l >= 2, or remove `l`"
                ),
            ));
        }
        match (self.diversity(), p.c) {
            (Diversity::Recursive, None) => {
                return Err(Error::spec(
                    "privacy.c",
                    "recursive (c,l)-diversity needs `c` (a number > 0, e.g. `c = 2`)",
                ))
            }
            (Diversity::Recursive, Some(c)) if !(c > 0.0 && c.is_finite()) => {
                return Err(Error::spec("privacy.c", "must be a number > 0"))
            }
            (Diversity::Distinct | Diversity::Entropy, Some(_)) => {
                return Err(Error::spec(
                    "privacy.c",
                    "only applies to `diversity = \"recursive\"`",
                ))
            }
            _ => {}
        }
        let columns = self.diversity_columns();
        if columns.is_empty() {
            return Err(Error::spec(
                "privacy.l",
                "l-diversity needs a sensitive column: give an attribute `role = \"sensitive\"`",
            ));
        }
        for c in &columns {
            if self.role_of(c) != Role::Sensitive {
                return Err(Error::spec(
                    "privacy.sensitive",
                    format!("`{c}` is not an attribute with `role = \"sensitive\"`"),
                ));
            }
        }
        Ok(())
    }
}

impl JobSpec {
    /// `privacy.entity`: `"row"`, or the identifying or pseudonymised
    /// column that names the person each row belongs to
    /// ([`crate::entity`]).
    fn validate_entity(&self) -> Result<()> {
        let Some(entity) = self.privacy.entity.as_deref() else {
            return Ok(());
        };
        if entity == super::privacy::ENTITY_ROW {
            return Ok(());
        }
        let message = match self.attributes.iter().find(|a| a.name == entity) {
            Some(a) if a.role == Role::Pseudonymised => return Ok(()),
            // The release must carry who is who for anyone to recount k in
            // people (`kanon verify`, a Delta commit's read-back): a
            // dropped column leaves a claim nobody can check.
            Some(a) if a.role == Role::Identifying => format!(
                "`{entity}` has role \"identifying\", so the release drops it, and nobody could recount its k in people (`kanon verify` counts the people of a release by their pseudonyms); make `{entity}` role = \"pseudonymised\" (each person gets one pseudonym, new for each release)"
            ),
            Some(_) => format!(
                "`{entity}` must be the column that identifies a person, with role \"identifying\" or \"pseudonymised\"; or write `entity = \"row\"` when every row is a different person or repeats are not people"
            ),
            None => format!(
                "no attribute is named `{entity}`; name the column that identifies a person, or write `entity = \"row\"`"
            ),
        };
        Err(Error::spec("privacy.entity", message))
    }
}

/// Whether `name` is an environment variable every shell, CI runner or
/// container sets to a guessable value (PATH, HOME, LANG, ...): a
/// pseudonym key read from it is no secret (issue 31, item 4).
fn is_common_variable(name: &str) -> bool {
    const NAMES: [&str; 40] = [
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "USERNAME",
        "SHELL",
        "PWD",
        "OLDPWD",
        "LANG",
        "LANGUAGE",
        "TERM",
        "HOSTNAME",
        "HOST",
        "TMPDIR",
        "TMP",
        "TEMP",
        "EDITOR",
        "VISUAL",
        "PAGER",
        "MAIL",
        "DISPLAY",
        "SHLVL",
        "TZ",
        "PS1",
        "PS2",
        "IFS",
        "UID",
        "EUID",
        "PPID",
        "RANDOM",
        "SECONDS",
        "LINENO",
        "JAVA_HOME",
        "PYTHONPATH",
        "LD_LIBRARY_PATH",
        "MANPATH",
        "COLUMNS",
        "LINES",
        "CI",
        "KANON_JOB",
    ];
    const PREFIXES: [&str; 9] = [
        "LC_",
        "XDG_",
        "SSH_",
        "GIT_",
        "CARGO",
        "RUST",
        "GITHUB_",
        "KUBERNETES_",
        "DBUS_",
    ];
    let upper = name.trim().to_ascii_uppercase();
    NAMES.contains(&upper.as_str()) || PREFIXES.iter().any(|p| upper.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_settings() {
        let bad: std::result::Result<JobSpec, _> = toml::from_str("[privacy]\nk = 2\nkk = 3\n");
        assert!(bad.unwrap_err().to_string().contains("kk"));
        let spec = JobSpec {
            attributes: vec![],
            ..Default::default()
        };
        assert!(spec
            .validate()
            .unwrap_err()
            .to_string()
            .contains("quasi-identifier"));
        let mut spec: JobSpec = toml::from_str(
            "[[attributes]]\nname = \"a\"\nrole = \"qi\"\nintervals = [5]\nhierarchy = \"a.csv\"\n",
        )
        .unwrap();
        assert!(spec
            .validate()
            .unwrap_err()
            .to_string()
            .contains("at most one"));
        spec.attributes[0].hierarchy = None;
        spec.privacy.k = 0;
        assert!(spec
            .validate()
            .unwrap_err()
            .to_string()
            .contains("privacy.k"));
    }

    #[test]
    fn windows_need_intervals_and_span_two_of_them() {
        let job = |extra: &str| -> JobSpec {
            toml::from_str(&format!(
                "[privacy]\nk = 2\n[[attributes]]\nname = \"age\"\nrole = \"qi\"\n{extra}\n"
            ))
            .unwrap()
        };
        let err = |extra: &str| job(extra).validate().unwrap_err().to_string();
        assert!(job("intervals = [5, 10]\nwindows = [2, 3]")
            .validate()
            .is_ok());
        let e = err("type = \"numeric\"\nwindows = [2]");
        assert!(
            e.contains("attributes.age.windows") && e.contains("intervals"),
            "{e}"
        );
        let e = err("intervals = [5, 10]\nwindows = [1]");
        assert!(
            e.contains("attributes.age.windows") && e.contains("at least 2"),
            "{e}"
        );
    }

    #[test]
    fn l_diversity_settings() {
        let job = |privacy: &str| -> JobSpec {
            toml::from_str(&format!(
                "[privacy]\n{privacy}\n[[attributes]]\nname = \"q\"\nrole = \"qi\"\n[[attributes]]\nname = \"d\"\nrole = \"sensitive\"\n[[attributes]]\nname = \"x\"\nrole = \"insensitive\"\n"
            ))
            .unwrap()
        };
        let ok = job("k = 1\nl = 3\ndiversity = \"entropy\"");
        ok.validate().unwrap();
        assert_eq!(ok.diversity(), Diversity::Entropy);
        assert_eq!(ok.diversity_columns(), vec!["d".to_string()]);
        assert_eq!(job("k = 1\nl = 2").diversity(), Diversity::Distinct);
        let err = |privacy: &str| job(privacy).validate().unwrap_err().to_string();
        assert!(err("k = 1\nl = 0").contains("privacy.l"));
        assert!(err("k = 1\nl = 2\ndiversity = \"recursive\"").contains("privacy.c"));
        assert!(err("k = 1\nl = 2\ndiversity = \"recursive\"\nc = 0").contains("> 0"));
        assert!(err("k = 1\nl = 2\nc = 2").contains("recursive"));
        assert!(err("k = 1\ndiversity = \"entropy\"").contains("set `l`"));
        assert!(err("k = 1\nl = 2\nsensitive = [\"x\"]").contains("`x`"));
        assert!(err("k = 1\nl = 2\nsensitive = [\"q\"]").contains("`q`"));
        let bad: std::result::Result<JobSpec, _> =
            toml::from_str("[privacy]\nk = 1\nl = 2\ndiversity = \"probabilistic\"\n");
        assert!(bad.unwrap_err().to_string().contains("distinct"));
        let mut none = ok.clone();
        none.attributes.retain(|a| a.role != Role::Sensitive);
        assert!(none
            .validate()
            .unwrap_err()
            .to_string()
            .contains("sensitive column"));
    }
}
