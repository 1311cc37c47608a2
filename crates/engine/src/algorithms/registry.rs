//! The algorithm registry: every algorithm kanon can run, built in or added
//! by a library user ([`register`]), with its name, a one-line summary, its
//! [`Capabilities`] and how to build it from the job's parameters, declared
//! in one place. Jobs name algorithms (`[algorithm] name = "..."`); the
//! release path looks them up here, and checks their capabilities before
//! any work, so an algorithm never meets a job it does not honour.

use crate::algorithms::{
    cover, datafly, heuristic_min, incognito, kaca, l_clustering, mdav, mondrian, safepub, sbc,
    Algorithm,
};
use crate::error::{Error, Result};
use crate::registry::{Named, Registry};
use crate::spec::AlgorithmSpec;

/// KACA without `block_size` runs on the whole table up to this many
/// distinct QI tuples among the active rows, whatever the number of rows
/// ([`Capabilities::whole_up_to_tuples`]): its merges work on classes of
/// identical tuples. On 10M generated Adult-like rows (285,386 distinct
/// tuples) the whole-table run took 7.5 s of algorithm against 18 s in
/// blocks, and lost 9 % less NCP (BENCHMARKS.md, "Whole-table and
/// block-wise runs"); beyond the measured size, blocks keep its cost
/// bounded.
pub const KACA_WHOLE_TUPLES: usize = 300_000;

/// `cover` without `block_size` runs on the whole table up to this many
/// distinct QI tuples among the active rows: its search works on classes
/// of identical tuples, so its time follows the tuples, not the rows. On
/// generated Adult-like rows the whole-table search took 0.4 s at 1M rows
/// (94,612 tuples), 0.9 s at 10M (285,386) and 1.6 s at 30M (511,960),
/// and at 10M it lost 26 % less NCP than in blocks of 10,000 rows, in a
/// tenth of the time (BENCHMARKS.md, "The cheapest-first cover", "At
/// scale"). Beyond the measured size, blocks keep its cost bounded.
pub const COVER_WHOLE_TUPLES: usize = 600_000;

/// What an algorithm can do. The defaults are the conservative ones: an
/// algorithm that does not declare a capability is never asked to use it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// Local recoding that may run block by block (`block_size`, and by
    /// default on large tables); global recoding publishes one
    /// generalisation for the whole table and must see all of it.
    pub block_wise: bool,
    /// Honours l-diversity (`privacy.l`) and every other model beyond k
    /// (`[privacy.models]`): the algorithm asks the models whether a class
    /// may be published. Jobs with `l` or models are refused otherwise.
    pub l_diversity: bool,
    /// A job without `block_size` runs on the whole table while its active
    /// rows have at most this many distinct QI tuples, whatever the number
    /// of rows: for algorithms whose cost grows with distinct tuples rather
    /// than rows (KACA merges classes). 0: the row threshold alone decides.
    pub whole_up_to_tuples: usize,
}

impl Capabilities {
    /// No capability: whole-table runs only, no l-diversity.
    pub const NONE: Capabilities = Capabilities {
        block_wise: false,
        l_diversity: false,
        whole_up_to_tuples: 0,
    };

    /// With [`Capabilities::whole_up_to_tuples`] set as given.
    pub const fn whole_up_to_tuples(self, tuples: usize) -> Self {
        Capabilities {
            whole_up_to_tuples: tuples,
            ..self
        }
    }

    /// With [`Capabilities::block_wise`] set as given.
    pub const fn block_wise(self, yes: bool) -> Self {
        Capabilities {
            block_wise: yes,
            ..self
        }
    }

    /// With [`Capabilities::l_diversity`] set as given.
    pub const fn l_diversity(self, yes: bool) -> Self {
        Capabilities {
            l_diversity: yes,
            ..self
        }
    }
}

/// Builds an algorithm from the job's `[algorithm]` section (its
/// parameters), or says which parameter is wrong ([`Error::Spec`]).
pub type Build = fn(&AlgorithmSpec) -> Result<Box<dyn Algorithm>>;

/// One registered algorithm.
#[derive(Debug, Clone, Copy)]
pub struct Registration {
    /// The name jobs use (`[algorithm] name`), lower case with hyphens.
    pub name: &'static str,
    /// One line for help texts and tables.
    pub summary: &'static str,
    /// What it can do.
    pub capabilities: Capabilities,
    /// How to build it.
    pub build: Build,
}

const LOCAL: Capabilities = Capabilities::NONE.block_wise(true).l_diversity(true);
const GLOBAL: Capabilities = Capabilities::NONE;

/// The algorithms kanon ships with, in the order help texts list them.
const BUILT_IN: &[Registration] = &[
    Registration {
        name: "mondrian",
        summary: "local recoding by top-down median cuts; hierarchies optional (LeFevre et al., ICDE 2006)",
        capabilities: LOCAL,
        build: |a| Ok(Box::new(mondrian::Mondrian::from_params(a.params()?))),
    },
    Registration {
        name: "datafly",
        summary: "global recoding, greedy, one level per QI; hierarchies required (Sweeney 2002)",
        capabilities: GLOBAL.l_diversity(true),
        build: |a| Ok(Box::new(datafly::Datafly::from_params(a.params()?))),
    },
    Registration {
        name: "incognito",
        summary: "global recoding, optimal over the full-domain lattice; hierarchies required (LeFevre et al., SIGMOD 2005)",
        capabilities: GLOBAL.l_diversity(true),
        build: |a| Ok(Box::new(incognito::Incognito::from_params(a.params()?))),
    },
    Registration {
        name: "sbc",
        summary: "local recoding by similarity-based clustering from contingency tables, always ranges and value sets; no hierarchies needed (the SBC thesis)",
        capabilities: LOCAL,
        build: |a| Ok(Box::new(sbc::Sbc::from_params(a.params()?))),
    },
    Registration {
        name: "heuristic-min",
        summary: "attribute-wise recoding, best-first, several <shield, k> requirements; hierarchies required (Arca, Hewett 2023)",
        capabilities: GLOBAL,
        build: |a| Ok(Box::new(heuristic_min::HeuristicMin::from_params(a.params()?)?)),
    },
    Registration {
        name: "kaca",
        summary: "local recoding by greedy merges of classes by weighted hierarchical distance; hierarchies used when given, ranges otherwise (Li et al. 2006; weights of Han et al. 2014)",
        capabilities: LOCAL.whole_up_to_tuples(KACA_WHOLE_TUPLES),
        build: |a| Ok(Box::new(kaca::Kaca::from_params(a.params()?)?)),
    },
    Registration {
        name: "l-clustering",
        summary: "local recoding by clusters grown to l distinct sensitive values; hierarchies optional (the L-clustering paper)",
        capabilities: LOCAL,
        build: |a| Ok(Box::new(l_clustering::LClustering::from_params(a.params()?))),
    },
    Registration {
        name: mondrian::HIERARCHY_BOUND,
        summary: "local recoding by top-down cuts into hierarchy children, rare values gathered table-wide, every value a hierarchy node; hierarchies used when given, ranges otherwise (LeFevre et al., ICDE 2006; Xu et al., KDD 2006)",
        capabilities: LOCAL,
        build: |a| Ok(Box::new(mondrian::Mondrian::hierarchy_bound(a)?)),
    },
    Registration {
        name: cover::NAME,
        summary: "local recoding by the cheapest boxes of hierarchy nodes (and of the interval windows a job declares) that gather k rows, taken greedily: the least loss kanon has; hierarchies required (Park, Shim, SIGMOD 2007; BUC, Beyer, Ramakrishnan, SIGMOD 1999)",
        capabilities: LOCAL.whole_up_to_tuples(COVER_WHOLE_TUPLES),
        build: |a| Ok(Box::new(cover::Cover::from_params(a.params()?)?)),
    },
    Registration {
        name: "mdav",
        summary: "local recoding by MDAV clustering into classes of k to 2k - 1 records (numbers by their range, categories by equality), the clustering of microaggregation; k only; hierarchies optional (Domingo-Ferrer, Torra, DMKD 2005)",
        capabilities: Capabilities::NONE.block_wise(true),
        build: |a| Ok(Box::new(mdav::Mdav::from_params(a.params()?))),
    },
    Registration {
        name: "safepub",
        summary: "global recoding under (epsilon, delta)-differential privacy (`[privacy.models.differential-privacy]`): a random sample of the rows, one full-domain generalisation chosen by the exponential mechanism or without reading the data, classes below the derived k suppressed; hierarchies required (Bild, Kuhn, Prasser, PoPETs 2018)",
        capabilities: GLOBAL.l_diversity(true),
        build: |a| Ok(Box::new(safepub::SafePub::from_params(a.params()?))),
    },
];

impl Named for Registration {
    fn name(&self) -> &'static str {
        self.name
    }
}

/// The built-in algorithms and those registered at run time.
static REGISTRY: Registry<Registration> = Registry::new("an algorithm", "algorithm.name", BUILT_IN);

/// Adds an algorithm for every job of this process (the CLI's, SQL's,
/// a library user's).
///
/// # Errors
/// [`Error::Spec`] when the name is empty, not lower case with hyphens, or
/// taken.
pub fn register(registration: Registration) -> Result<()> {
    REGISTRY.register(registration)
}

/// Every registered algorithm: the built-in ones, then those added by
/// [`register`].
pub fn all() -> Vec<Registration> {
    REGISTRY.all()
}

/// The algorithm of that name.
pub fn get(name: &str) -> Option<Registration> {
    REGISTRY.get(name)
}

/// The names of every registered algorithm.
pub fn names() -> Vec<&'static str> {
    all().iter().map(|r| r.name).collect()
}

/// The algorithm of that name, or an error listing the registered ones.
///
/// # Errors
/// [`Error::Spec`] naming `algorithm.name`.
pub fn lookup(name: &str) -> Result<Registration> {
    get(name).ok_or_else(|| {
        Error::spec(
            "algorithm.name",
            format!(
                "unknown algorithm `{name}`; choose one of: {}",
                names().join(", ")
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_names_are_unique_and_valid() {
        let names = names();
        for (i, n) in names.iter().enumerate() {
            assert!(!names[..i].contains(n), "{n} twice");
        }
        assert_eq!(names.len(), 11);
        let err = register(Registration {
            name: "mondrian",
            ..BUILT_IN[0]
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("exists"), "{err}");
        let err = register(Registration {
            name: "Bad Name",
            ..BUILT_IN[0]
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("lower case"), "{err}");
    }

    #[test]
    fn capabilities_default_to_none() {
        assert_eq!(Capabilities::default(), Capabilities::NONE);
        let hmin = get("heuristic-min").unwrap().capabilities;
        assert!(!hmin.block_wise && !hmin.l_diversity);
        assert!(!get("incognito").unwrap().capabilities.block_wise);
        assert!(get("mondrian").unwrap().capabilities.block_wise);
    }
}
