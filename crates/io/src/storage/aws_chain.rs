//! S3 credentials, region and endpoint found the way the AWS SDKs find them,
//! by the SDK's own code (`aws-config`) rather than a reader of our own.
//!
//! The shared files (`~/.aws/config` and `~/.aws/credentials`, or
//! `AWS_CONFIG_FILE` and `AWS_SHARED_CREDENTIALS_FILE`) are parsed by the
//! SDK's parser; a profile's `region` (followed through `source_profile`)
//! and `endpoint_url` are read from it by [`load_profile`]. Credentials come
//! from [`chain`]: the selected profile with every source a profile can name
//! (static keys; `role_arn` with `source_profile` or `credential_source`,
//! assumed through STS; `sso_session` or the legacy `sso_*` keys, after
//! `aws sso login`; `credential_process`; `web_identity_token_file`), then a
//! web identity token from the environment (EKS IRSA), the container
//! endpoint (ECS, EKS Pod Identity) and, for AWS itself only, the instance
//! metadata service. Keys in the environment (`AWS_ACCESS_KEY_ID`, ...) are
//! read by object_store itself and win over all of this.
//!
//! [`Chain`] bridges the SDK's provider into object_store's
//! [`CredentialProvider`]: it keeps a credential until shortly before it
//! expires and fetches a new one then, one fetch at a time (the SDK's own
//! cache lives inside its service clients, which object_store does not use).
//! Its errors name the bucket and the profile and say what to fix; no
//! secret is ever part of them.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Result;
use async_trait::async_trait;
use aws_config::ecs::EcsCredentialsProvider;
use aws_config::imds::credentials::ImdsCredentialsProvider;
use aws_config::meta::region::ProvideRegion;
use aws_config::profile::{ProfileFileCredentialsProvider, ProfileFileRegionProvider};
use aws_config::provider_config::ProviderConfig;
use aws_config::web_identity_token::WebIdentityTokenCredentialsProvider;
use aws_config::Region;
use aws_credential_types::provider::error::CredentialsError;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_credential_types::Credentials;
use aws_runtime::env_config::file::EnvConfigFiles;
use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
use aws_types::os_shim_internal::{Env, Fs};
use object_store::aws::AwsCredential;
use object_store::CredentialProvider;

use crate::exit::Failure;

/// A credential is renewed this long before it expires, so that no request
/// is signed with one that expires in flight.
const RENEW_BEFORE: Duration = Duration::from_secs(5 * 60);

/// What the selected profile says about where S3 is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Profile {
    /// `region`, of the profile or of its `source_profile`.
    pub region: Option<String>,
    /// `endpoint_url`.
    pub endpoint_url: Option<String>,
}

fn home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// `AWS_SHARED_CREDENTIALS_FILE`, or `~/.aws/credentials` (for messages).
pub fn credentials_file() -> PathBuf {
    std::env::var_os("AWS_SHARED_CREDENTIALS_FILE")
        .map(PathBuf::from)
        .unwrap_or_else(|| home().join(".aws").join("credentials"))
}

/// `AWS_CONFIG_FILE`, or `~/.aws/config` (for messages).
pub fn config_file() -> PathBuf {
    std::env::var_os("AWS_CONFIG_FILE")
        .map(PathBuf::from)
        .unwrap_or_else(|| home().join(".aws").join("config"))
}

fn files() -> String {
    format!(
        "{} or {}",
        config_file().display(),
        credentials_file().display()
    )
}

/// Reads the profile `name` (else `AWS_PROFILE`, else `default`) from the
/// shared files with the SDK's parser. Only files are read, no network:
/// this runs inside or outside an async runtime alike.
///
/// # Errors
/// A bad-input failure naming the profile when `name` is given and is in
/// neither file, or when a file cannot be parsed and `lenient` is false
/// (keys in the environment make the files optional).
pub fn load_profile(name: Option<&str>, lenient: bool) -> Result<Profile> {
    futures::executor::block_on(load_profile_async(name, lenient))
}

async fn load_profile_async(name: Option<&str>, lenient: bool) -> Result<Profile> {
    let selected = name.map(|n| Cow::Owned(n.to_string()));
    let set = match aws_config::profile::load(
        &Fs::real(),
        &Env::real(),
        &EnvConfigFiles::default(),
        selected,
    )
    .await
    {
        Ok(set) => set,
        Err(_) if lenient && name.is_none() => return Ok(Profile::default()),
        Err(e) => {
            return Err(Failure::bad_input(format!(
                "cannot read the AWS profile files ({}): {}",
                files(),
                error_chain(&e)
            ))
            .into())
        }
    };
    if let Some(n) = name {
        if set.get_profile(n).is_none() {
            return Err(Failure::bad_input(format!(
                "AWS profile `{n}` (AWS_PROFILE or `storage.profile`) is in neither {} nor {}",
                credentials_file().display(),
                config_file().display()
            ))
            .into());
        }
    }
    let mut region = ProfileFileRegionProvider::builder();
    if let Some(n) = name {
        region = region.profile_name(n);
    }
    let region = region.build().region().await.map(|r| r.to_string());
    let endpoint_url = set
        .get_profile(set.selected_profile())
        .and_then(|p| p.get("endpoint_url"))
        .map(str::to_string);
    Ok(Profile {
        region,
        endpoint_url,
    })
}

/// The credential provider of a bucket: the profile `profile` (else
/// `AWS_PROFILE`, else `default`), web identity, the container endpoint and,
/// when `instance_metadata` (the endpoint is AWS's), the instance metadata
/// service, in that order. `region` is the one STS is called in.
pub fn chain(
    bucket: &str,
    profile: Option<&str>,
    region: Option<&str>,
    instance_metadata: bool,
) -> Chain {
    // The SDK's HTTP client on rustls with ring, as object_store's; no
    // aws-lc (a C build) and no second TLS stack.
    let http = aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https();
    let conf = ProviderConfig::without_region()
        .with_http_client(http)
        .with_region(region.map(|r| Region::new(r.to_string())));
    let mut from_profile = ProfileFileCredentialsProvider::builder().configure(&conf);
    if let Some(p) = profile {
        from_profile = from_profile.profile_name(p);
    }
    let mut providers = vec![
        (
            "Profile",
            SharedCredentialsProvider::new(from_profile.build()),
        ),
        (
            "WebIdentityToken",
            SharedCredentialsProvider::new(
                WebIdentityTokenCredentialsProvider::builder()
                    .configure(&conf)
                    .build(),
            ),
        ),
        (
            "EcsContainer",
            SharedCredentialsProvider::new(
                EcsCredentialsProvider::builder().configure(&conf).build(),
            ),
        ),
    ];
    if instance_metadata {
        providers.push((
            "Ec2InstanceMetadata",
            SharedCredentialsProvider::new(
                ImdsCredentialsProvider::builder().configure(&conf).build(),
            ),
        ));
    }
    Chain::new(
        providers,
        bucket,
        profile
            .map(str::to_string)
            .or_else(|| std::env::var("AWS_PROFILE").ok().filter(|p| !p.is_empty()))
            .unwrap_or_else(|| "default".to_string()),
    )
}

/// An AWS SDK credential provider as object_store's, cached (see the module
/// documentation).
///
/// The providers are tried in order, as the SDK's own chain does; unlike
/// it, when none has credentials the profile's reason is kept for the
/// message (a `source_profile` that does not exist, say).
#[derive(Debug)]
pub struct Chain {
    providers: Vec<(&'static str, SharedCredentialsProvider)>,
    bucket: String,
    profile: String,
    cached: tokio::sync::Mutex<Option<Cached>>,
}

#[derive(Debug)]
struct Cached {
    credential: Arc<AwsCredential>,
    expiry: Option<SystemTime>,
}

impl Chain {
    /// Tries `providers` in order; `bucket` and `profile` are for messages.
    pub fn new(
        providers: Vec<(&'static str, SharedCredentialsProvider)>,
        bucket: &str,
        profile: String,
    ) -> Self {
        Chain {
            providers,
            bucket: bucket.to_string(),
            profile,
            cached: tokio::sync::Mutex::new(None),
        }
    }

    /// The first credentials a provider has; the first error that is not
    /// "none here", or the profile's "none here" when no provider has any.
    async fn provide(&self) -> Result<Credentials, CredentialsError> {
        let mut not_loaded = None;
        for (name, p) in &self.providers {
            match p.provide_credentials().await {
                Ok(c) => return Ok(c),
                Err(e @ CredentialsError::CredentialsNotLoaded(_)) => {
                    tracing::debug!(provider = name, error = %error_chain(&e), "no S3 credentials here");
                    not_loaded.get_or_insert(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(not_loaded.unwrap_or_else(|| CredentialsError::not_loaded("no credential provider")))
    }

    fn error(&self, e: &CredentialsError) -> object_store::Error {
        let (bucket, profile) = (&self.bucket, &self.profile);
        let source = Box::new(Unavailable(match e {
            CredentialsError::CredentialsNotLoaded(_) => format!(
                "no S3 credentials for bucket `{bucket}`: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or give the AWS profile `{profile}` (AWS_PROFILE or `storage.profile`) keys, a role to assume, SSO or a credential_process in {} ({})",
                files(),
                error_chain(e)
            ),
            _ => format!(
                "cannot get S3 credentials for bucket `{bucket}` from AWS profile `{profile}` (AWS_PROFILE or `storage.profile`): {}; check the profile in {} (for SSO, run `aws sso login --profile {profile}`)",
                error_chain(e),
                files()
            ),
        }));
        match e {
            CredentialsError::ProviderTimedOut(_) | CredentialsError::Unhandled(_) => {
                object_store::Error::Generic {
                    store: "S3",
                    source,
                }
            }
            _ => object_store::Error::Unauthenticated {
                path: String::new(),
                source,
            },
        }
    }
}

#[async_trait]
impl CredentialProvider for Chain {
    type Credential = AwsCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<AwsCredential>> {
        let mut cached = self.cached.lock().await;
        let now = SystemTime::now();
        if let Some(c) = cached.as_ref() {
            if c.expiry.is_none_or(|t| t > now + RENEW_BEFORE) {
                return Ok(c.credential.clone());
            }
        }
        match self.provide().await {
            Ok(c) => {
                let credential = Arc::new(AwsCredential {
                    key_id: c.access_key_id().to_string(),
                    secret_key: c.secret_access_key().to_string(),
                    token: c.session_token().map(str::to_string),
                });
                *cached = Some(Cached {
                    credential: credential.clone(),
                    expiry: c.expiry(),
                });
                Ok(credential)
            }
            Err(e) => match cached.as_ref() {
                // Renewing early failed: the current one is still good.
                Some(c) if c.expiry.is_some_and(|t| t > now) => {
                    tracing::warn!(bucket = %self.bucket, error = %error_chain(&e), "cannot renew the S3 credentials yet; using the current ones until they expire");
                    Ok(c.credential.clone())
                }
                _ => Err(self.error(&e)),
            },
        }
    }
}

/// Why no credential could be had: the whole message for the user.
#[derive(Debug)]
pub struct Unavailable(pub String);

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unavailable {}

/// An error and its causes on one line (the SDK puts the useful part in the
/// causes).
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_credential_types::provider::future;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Hands out credentials that expire `ttl` from now, counting the calls.
    #[derive(Debug)]
    struct Counting {
        calls: Arc<AtomicUsize>,
        ttl: Option<Duration>,
        fail: bool,
    }

    impl ProvideCredentials for Counting {
        fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
        where
            Self: 'a,
        {
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            if self.fail {
                return future::ProvideCredentials::ready(Err(CredentialsError::provider_error(
                    "the role cannot be assumed",
                )));
            }
            future::ProvideCredentials::ready(Ok(Credentials::new(
                format!("AKIA{n}"),
                "secret",
                Some("token".into()),
                self.ttl.map(|t| SystemTime::now() + t),
                "test",
            )))
        }
    }

    fn chain_of(ttl: Option<Duration>, fail: bool) -> (Chain, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let p = Counting {
            calls: calls.clone(),
            ttl,
            fail,
        };
        (
            Chain::new(
                vec![("Counting", SharedCredentialsProvider::new(p))],
                "lake",
                "dev".into(),
            ),
            calls,
        )
    }

    fn run<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn credentials_are_kept_until_shortly_before_they_expire() {
        let (c, calls) = chain_of(Some(Duration::from_secs(3600)), false);
        let a = run(c.get_credential()).unwrap();
        let b = run(c.get_credential()).unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(a.key_id, "AKIA0");
        assert_eq!(b.token.as_deref(), Some("token"));
        // Static keys (no expiry) are fetched once too.
        let (c, calls) = chain_of(None, false);
        run(c.get_credential()).unwrap();
        run(c.get_credential()).unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // One that expires within the renewal margin is renewed each time.
        let (c, calls) = chain_of(Some(Duration::from_secs(60)), false);
        assert_eq!(run(c.get_credential()).unwrap().key_id, "AKIA0");
        assert_eq!(run(c.get_credential()).unwrap().key_id, "AKIA1");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_failure_names_the_bucket_and_the_profile() {
        let (c, _) = chain_of(None, true);
        let e = run(c.get_credential()).unwrap_err();
        assert!(matches!(e, object_store::Error::Unauthenticated { .. }));
        let text = e.to_string();
        assert!(text.contains("bucket `lake`"), "{text}");
        assert!(text.contains("AWS profile `dev`"), "{text}");
        assert!(text.contains("the role cannot be assumed"), "{text}");
    }

    #[test]
    fn providers_are_tried_in_order_and_the_profile_says_why_none_had_any() {
        let c = Chain::new(
            vec![
                ("Profile", not_loaded("profile `gone` was not defined")),
                ("Other", not_loaded("no token file")),
            ],
            "lake",
            "reader".into(),
        );
        let text = run(c.get_credential()).unwrap_err().to_string();
        assert!(
            text.contains("no S3 credentials for bucket `lake`"),
            "{text}"
        );
        assert!(text.contains("profile `gone` was not defined"), "{text}");
        let (counting, _) = chain_of(None, false);
        let c = Chain::new(
            vec![
                ("Profile", not_loaded("no profile")),
                ("Counting", counting.providers.into_iter().next().unwrap().1),
            ],
            "lake",
            "reader".into(),
        );
        assert_eq!(run(c.get_credential()).unwrap().key_id, "AKIA0");
    }

    #[derive(Debug)]
    struct NotLoaded(&'static str);

    impl ProvideCredentials for NotLoaded {
        fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
        where
            Self: 'a,
        {
            future::ProvideCredentials::ready(Err(CredentialsError::not_loaded(self.0)))
        }
    }

    fn not_loaded(why: &'static str) -> SharedCredentialsProvider {
        SharedCredentialsProvider::new(NotLoaded(why))
    }
}
