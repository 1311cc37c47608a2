//! The AWS shared credentials and config files (`~/.aws/credentials`,
//! `~/.aws/config`), read the way the AWS SDKs read them: a profile's keys
//! from the credentials file, its region and endpoint from the config file
//! (`[profile NAME]`, or `[default]`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::exit::Failure;

/// What a profile provides.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Profile {
    /// `aws_access_key_id`.
    pub access_key_id: Option<String>,
    /// `aws_secret_access_key`.
    pub secret_access_key: Option<String>,
    /// `aws_session_token`.
    pub session_token: Option<String>,
    /// `region`.
    pub region: Option<String>,
    /// `endpoint_url`.
    pub endpoint_url: Option<String>,
}

fn home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// `AWS_SHARED_CREDENTIALS_FILE`, or `~/.aws/credentials`.
pub fn credentials_file() -> PathBuf {
    std::env::var_os("AWS_SHARED_CREDENTIALS_FILE")
        .map(PathBuf::from)
        .unwrap_or_else(|| home().join(".aws").join("credentials"))
}

/// `AWS_CONFIG_FILE`, or `~/.aws/config`.
pub fn config_file() -> PathBuf {
    std::env::var_os("AWS_CONFIG_FILE")
        .map(PathBuf::from)
        .unwrap_or_else(|| home().join(".aws").join("config"))
}

/// Loads a profile: `name`, else `default`. A named profile that is in
/// neither file is an error; a missing `default` is not.
///
/// # Errors
/// A bad-input failure naming the profile and the files.
pub fn load(name: Option<&str>) -> Result<Profile> {
    let wanted = name.unwrap_or("default");
    let creds = read_ini(&credentials_file());
    let config = read_ini(&config_file());
    let from_creds = creds.get(wanted);
    let config_section = if wanted == "default" {
        "default".to_string()
    } else {
        format!("profile {wanted}")
    };
    let from_config = config.get(&config_section).or_else(|| config.get(wanted));
    if from_creds.is_none() && from_config.is_none() && name.is_some() {
        return Err(Failure::bad_input(format!(
            "AWS profile `{wanted}` (AWS_PROFILE or `storage.profile`) is in neither {} nor {}",
            credentials_file().display(),
            config_file().display()
        ))
        .into());
    }
    let get = |k: &str| {
        from_creds
            .and_then(|s| s.get(k))
            .or_else(|| from_config.and_then(|s| s.get(k)))
            .cloned()
    };
    Ok(Profile {
        access_key_id: get("aws_access_key_id"),
        secret_access_key: get("aws_secret_access_key"),
        session_token: get("aws_session_token"),
        region: from_config
            .and_then(|s| s.get("region"))
            .or_else(|| from_creds.and_then(|s| s.get("region")))
            .cloned(),
        endpoint_url: get("endpoint_url"),
    })
}

type Sections = HashMap<String, HashMap<String, String>>;

fn read_ini(path: &Path) -> Sections {
    std::fs::read_to_string(path)
        .map(|t| parse_ini(&t))
        .unwrap_or_default()
}

/// Parses the INI dialect of the AWS files (`[section]`, `key = value`,
/// `#` and `;` comments; indented lines belong to nested settings and
/// are skipped).
pub fn parse_ini(text: &str) -> Sections {
    let mut out: Sections = HashMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if line.starts_with([' ', '\t']) {
            continue;
        }
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(section) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let name = section.split_whitespace().collect::<Vec<_>>().join(" ");
            out.entry(name.clone()).or_default();
            current = Some(name);
        } else if let (Some(section), Some((k, v))) = (&current, line.split_once('=')) {
            out.entry(section.clone())
                .or_default()
                .insert(k.trim().to_lowercase(), v.trim().to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_aws_files() {
        let ini = parse_ini(
            "# comment\n[default]\naws_access_key_id = AKIA1\naws_secret_access_key=s1\n\n[profile  dev]\nregion = eu-west-1\ns3 =\n  addressing_style = path\nendpoint_url = http://127.0.0.1:9000\n",
        );
        assert_eq!(ini["default"]["aws_access_key_id"], "AKIA1");
        assert_eq!(ini["default"]["aws_secret_access_key"], "s1");
        assert_eq!(ini["profile dev"]["region"], "eu-west-1");
        assert_eq!(ini["profile dev"]["endpoint_url"], "http://127.0.0.1:9000");
        assert!(!ini["profile dev"].contains_key("addressing_style"));
    }
}
