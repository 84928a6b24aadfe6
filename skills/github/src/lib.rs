//! The `github` skill: repositories, issues and users from the GitHub REST
//! API.
//!
//! The only host it may reach is `https://api.github.com` (`[network]` in
//! `skill.toml`). Authentication is the host's business: a `[[secrets]]`
//! binding makes the host add `Authorization: Bearer <token>` to requests to
//! that host, so the skill never handles the token (and sends none itself).
//! Without a stored token the same requests go out anonymously.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use skillhost_sdk::http::{Request, Response};
use skillhost_sdk::prelude::*;

/// The API's base URL: the one host the manifest allows.
const API: &str = "https://api.github.com";
/// GitHub requires a User-Agent.
const USER_AGENT: &str = "skillhost-github-skill";
/// Time one API request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// Redirects followed at most (GitHub redirects renamed repositories).
const MAX_REDIRECTS: usize = 3;

// ---------------------------------------------------------------------- repo

/// A repository.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RepoInput {
    /// The owner (user or organisation), as in github.com/OWNER/REPO.
    owner: String,
    /// The repository's name, as in github.com/OWNER/REPO.
    repo: String,
}

/// What the API says about a repository (the fields used).
#[derive(Deserialize)]
struct ApiRepo {
    full_name: String,
    description: Option<String>,
    html_url: String,
    stargazers_count: u64,
    forks_count: u64,
    open_issues_count: u64,
    default_branch: String,
    updated_at: Option<String>,
    pushed_at: Option<String>,
    language: Option<String>,
    #[serde(default)]
    archived: bool,
    #[serde(default)]
    private: bool,
}

/// Facts about a repository.
#[derive(Serialize, JsonSchema)]
struct RepoOutput {
    /// `owner/name` (the current name, if the repository was renamed).
    full_name: String,
    /// The description, if any.
    description: Option<String>,
    /// Stars.
    stars: u64,
    /// Forks.
    forks: u64,
    /// Open issues *and* open pull requests (GitHub counts both).
    open_issues: u64,
    /// The default branch, e.g. `main`.
    default_branch: String,
    /// When the repository was last updated (ISO 8601).
    updated: Option<String>,
    /// When something was last pushed (ISO 8601).
    pushed: Option<String>,
    /// The main language, if GitHub detected one.
    language: Option<String>,
    /// Whether the repository is archived (read-only).
    archived: bool,
    /// Whether it is private.
    private: bool,
    /// Its page on github.com.
    url: String,
}

/// Facts about a GitHub repository: stars, forks, open issues, description,
/// default branch, language and when it was last updated.
#[tool(read_only, idempotent, open_world, example = r#"{"owner": "rust-lang", "repo": "rust"}"#)]
fn repo(input: RepoInput) -> Result<RepoOutput, ToolError> {
    let (owner, name) = (name("owner", &input.owner)?, repo_name(&input.repo)?);
    let repo: ApiRepo = get(&format!("/repos/{owner}/{name}"), &format!("repository {owner}/{name}"))?;
    Ok(RepoOutput {
        full_name: repo.full_name,
        description: repo.description,
        stars: repo.stargazers_count,
        forks: repo.forks_count,
        open_issues: repo.open_issues_count,
        default_branch: repo.default_branch,
        updated: repo.updated_at,
        pushed: repo.pushed_at,
        language: repo.language,
        archived: repo.archived,
        private: repo.private,
        url: repo.html_url,
    })
}

// -------------------------------------------------------------------- issues

/// Which issues to list.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct IssuesInput {
    /// The owner (user or organisation), as in github.com/OWNER/REPO.
    owner: String,
    /// The repository's name, as in github.com/OWNER/REPO.
    repo: String,
    /// `open` (default), `closed` or `all`.
    #[serde(default)]
    state: IssueState,
    /// How many issues to return, 1 to 100 (default 20).
    #[serde(default = "default_limit")]
    limit: u32,
}

/// An issue state filter.
#[derive(Deserialize, JsonSchema, Default, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum IssueState {
    /// Open issues.
    #[default]
    Open,
    /// Closed issues.
    Closed,
    /// Both.
    All,
}

impl IssueState {
    fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Closed => "closed",
            Self::All => "all",
        }
    }
}

fn default_limit() -> u32 {
    20
}

/// An issue as the API returns it (the fields used).
#[derive(Deserialize)]
struct ApiIssue {
    number: u64,
    title: String,
    state: String,
    html_url: String,
    user: Option<ApiUserRef>,
    #[serde(default)]
    labels: Vec<ApiLabel>,
    #[serde(default)]
    comments: u64,
    created_at: Option<String>,
    /// Present on pull requests, which the issues endpoint also lists.
    pull_request: Option<skillhost_sdk::serde_json::Value>,
}

#[derive(Deserialize)]
struct ApiUserRef {
    login: String,
}

#[derive(Deserialize)]
struct ApiLabel {
    name: String,
}

/// One issue.
#[derive(Serialize, JsonSchema)]
struct Issue {
    /// The issue number, as in `#123`.
    number: u64,
    /// The title.
    title: String,
    /// `open` or `closed`.
    state: String,
    /// The login of who opened it (`ghost` for a deleted account).
    author: String,
    /// Label names.
    labels: Vec<String>,
    /// Number of comments.
    comments: u64,
    /// When it was opened (ISO 8601).
    created: Option<String>,
    /// Its page on github.com.
    url: String,
}

/// The issues found.
#[derive(Serialize, JsonSchema)]
struct IssuesOutput {
    /// Issues, newest first (pull requests left out).
    issues: Vec<Issue>,
    /// How many pull requests were left out of the page that was read.
    pull_requests_skipped: usize,
}

/// List a repository's issues, newest first, with number, title, state,
/// author, labels and link. Pull requests are left out.
#[tool(
    read_only,
    idempotent,
    open_world,
    example = r#"{"owner": "rust-lang", "repo": "rust"}"#,
    example = r#"{"owner": "bytecodealliance", "repo": "wasmtime", "state": "closed", "limit": 5}"#
)]
fn issues(input: IssuesInput) -> Result<IssuesOutput, ToolError> {
    let (owner, name) = (name("owner", &input.owner)?, repo_name(&input.repo)?);
    if !(1..=100).contains(&input.limit) {
        return Err(ToolError::invalid_input(format!("limit: {} is out of range; give 1 to 100", input.limit)));
    }
    // One page of 100: pull requests share the endpoint and are dropped here.
    let page: Vec<ApiIssue> = get(
        &format!("/repos/{owner}/{name}/issues?state={}&sort=created&direction=desc&per_page=100", input.state.as_str()),
        &format!("repository {owner}/{name}"),
    )?;
    let total = page.len();
    let issues: Vec<Issue> = page
        .into_iter()
        .filter(|issue| issue.pull_request.is_none())
        .take(input.limit as usize)
        .map(|issue| Issue {
            number: issue.number,
            title: issue.title,
            state: issue.state,
            author: issue.user.map_or_else(|| "ghost".into(), |u| u.login),
            labels: issue.labels.into_iter().map(|l| l.name).collect(),
            comments: issue.comments,
            created: issue.created_at,
            url: issue.html_url,
        })
        .collect();
    let pull_requests_skipped = if issues.len() < input.limit as usize { total - issues.len() } else { 0 };
    Ok(IssuesOutput { issues, pull_requests_skipped })
}

// ---------------------------------------------------------------------- user

/// A user or organisation.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UserInput {
    /// The login, as in github.com/LOGIN.
    login: String,
}

/// A user as the API returns it (the fields used).
#[derive(Deserialize)]
struct ApiUser {
    login: String,
    name: Option<String>,
    #[serde(rename = "type")]
    kind: String,
    bio: Option<String>,
    company: Option<String>,
    location: Option<String>,
    blog: Option<String>,
    #[serde(default)]
    public_repos: u64,
    #[serde(default)]
    followers: u64,
    #[serde(default)]
    following: u64,
    created_at: Option<String>,
    html_url: String,
}

/// A user's or organisation's public profile.
#[derive(Serialize, JsonSchema)]
struct UserOutput {
    /// The login.
    login: String,
    /// The display name, if set.
    name: Option<String>,
    /// `User` or `Organization`.
    kind: String,
    /// The bio, if set.
    bio: Option<String>,
    /// The company, if set.
    company: Option<String>,
    /// The location, if set.
    location: Option<String>,
    /// The web site, if set.
    blog: Option<String>,
    /// Public repositories.
    public_repos: u64,
    /// Followers.
    followers: u64,
    /// Accounts followed.
    following: u64,
    /// When the account was created (ISO 8601).
    created: Option<String>,
    /// The profile page.
    url: String,
}

/// A GitHub user's or organisation's public profile: name, bio, company,
/// location, public repositories and followers.
#[tool(read_only, idempotent, open_world, example = r#"{"login": "torvalds"}"#)]
fn user(input: UserInput) -> Result<UserOutput, ToolError> {
    let login = name("login", &input.login)?;
    let user: ApiUser = get(&format!("/users/{login}"), &format!("user {login}"))?;
    Ok(UserOutput {
        login: user.login,
        name: user.name,
        kind: user.kind,
        bio: user.bio,
        company: user.company,
        location: user.location,
        blog: user.blog.filter(|b| !b.is_empty()),
        public_repos: user.public_repos,
        followers: user.followers,
        following: user.following,
        created: user.created_at,
        url: user.html_url,
    })
}

skillhost_sdk::skill!(repo, issues, user);

// --------------------------------------------------------------------- shared

/// Checks an owner or login: it goes into the URL's path, so only the
/// characters GitHub allows in names.
fn name<'a>(field: &str, value: &'a str) -> Result<&'a str, ToolError> {
    let value = value.trim();
    let ok = !value.is_empty()
        && value.len() <= 100
        && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !value.starts_with('.');
    if ok {
        Ok(value)
    } else {
        Err(ToolError::invalid_input(format!(
            "{field}: `{value}` is not a GitHub name (letters, digits, `-`, `_`, `.`); give \
             the parts of github.com/OWNER/REPO separately"
        )))
    }
}

/// A repository name; a trailing `.git` is dropped.
fn repo_name(value: &str) -> Result<&str, ToolError> {
    let value = value.trim();
    name("repo", value.strip_suffix(".git").unwrap_or(value))
}

/// `GET {API}{path}` as JSON, following GitHub's redirects (renamed
/// repositories) on the same host, with errors that say what to do.
fn get<T: for<'de> Deserialize<'de>>(path: &str, what: &str) -> Result<T, ToolError> {
    let mut url = format!("{API}{path}");
    for _ in 0..=MAX_REDIRECTS {
        // No Authorization header: the host adds the bound secret, if stored.
        let response = Request::get(&url)
            .header("User-Agent", USER_AGENT)
            .header("Accept", "application/vnd.github+json")
            .header("X-GitHub-Api-Version", "2022-11-28")
            .timeout(REQUEST_TIMEOUT)
            .send()?;
        if response.is_redirect()
            && let Some(location) = response.header("location")
            && location.starts_with(&format!("{API}/"))
        {
            url = location.to_owned();
            continue;
        }
        return answer(response, what);
    }
    Err(ToolError::failed(format!("GitHub redirected more than {MAX_REDIRECTS} times for {what}")))
}

/// Turns an API response into `T` or an error that says what to do.
fn answer<T: for<'de> Deserialize<'de>>(response: Response, what: &str) -> Result<T, ToolError> {
    let message = || {
        response
            .json::<skillhost_sdk::serde_json::Value>()
            .ok()
            .and_then(|v| v.get("message")?.as_str().map(str::to_owned))
            .unwrap_or_default()
    };
    match response.status {
        200..=299 => Ok(response.json()?),
        404 => Err(ToolError::failed(format!(
            "{what} not found: it does not exist, or it is private and the stored token (if \
             any) has no access to it"
        ))),
        401 => Err(ToolError::failed(format!(
            "GitHub refused the token ({}): it is invalid or expired; store a new one with \
             `skillhost secret set github`",
            message()
        ))),
        403 | 429 if response.header("x-ratelimit-remaining") == Some("0") => Err(ToolError::failed(format!(
            "rate limited by GitHub{}; without a token the limit is 60 requests an hour: \
                 store one with `skillhost secret set github`",
            reset_in(response.header("x-ratelimit-reset"))
        ))),
        _ => Err(match response.error_for_status() {
            Err(error) => error.into(),
            Ok(response) => ToolError::failed(format!("GitHub answered {} for {what}", response.status)),
        }),
    }
}

/// `" until about 12 minutes from now"` from an `x-ratelimit-reset` header.
fn reset_in(reset: Option<&str>) -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    match reset.and_then(|r| r.parse::<u64>().ok()) {
        Some(at) if at > now => {
            format!(" until about {} minutes from now", (at - now).div_ceil(60))
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skillhost_sdk::http::{self, HttpError};

    fn api(request: &Request) -> Result<Response, HttpError> {
        assert_eq!(request.header_value("user-agent"), Some(USER_AGENT));
        assert_eq!(request.header_value("accept"), Some("application/vnd.github+json"));
        assert_eq!(request.header_value("authorization"), None, "the host adds the token");
        let json = |body: &str| Ok(Response::new(200).with_body(body.to_owned()));
        match request.url() {
            "https://api.github.com/repos/old/name" => {
                Ok(Response::new(301).with_header("location", "https://api.github.com/repositories/42"))
            }
            "https://api.github.com/repositories/42" => json(
                r#"{"full_name": "new/name", "description": "d", "html_url": "https://github.com/new/name",
                    "stargazers_count": 5, "forks_count": 1, "open_issues_count": 2,
                    "default_branch": "main", "updated_at": "2024-01-01T00:00:00Z",
                    "pushed_at": null, "language": "Rust", "extra": true}"#,
            ),
            "https://api.github.com/repos/a/b/issues?state=open&sort=created&direction=desc&per_page=100" => json(
                r#"[{"number": 3, "title": "pr", "state": "open", "html_url": "u3", "user": {"login": "x"}, "pull_request": {}},
                    {"number": 2, "title": "bug", "state": "open", "html_url": "u2", "user": null, "labels": [{"name": "bug"}]},
                    {"number": 1, "title": "old", "state": "open", "html_url": "u1", "user": {"login": "y"}}]"#,
            ),
            "https://api.github.com/users/limited" => {
                Ok(Response::new(403).with_header("x-ratelimit-remaining", "0").with_body(r#"{"message": "API rate limit exceeded"}"#))
            }
            _ => Ok(Response::new(404).with_body(r#"{"message": "Not Found"}"#)),
        }
    }

    #[test]
    fn repo_follows_renames() {
        let out = http::with_handler(api, || repo(RepoInput { owner: "old".into(), repo: "name.git".into() })).unwrap();
        assert_eq!((out.full_name.as_str(), out.stars, out.open_issues), ("new/name", 5, 2));
        assert_eq!(out.default_branch, "main");
    }

    #[test]
    fn issues_leave_out_pull_requests() {
        let out =
            http::with_handler(api, || issues(IssuesInput { owner: "a".into(), repo: "b".into(), state: IssueState::Open, limit: 1 }))
                .unwrap();
        assert_eq!(out.issues.len(), 1);
        let issue = &out.issues[0];
        assert_eq!((issue.number, issue.author.as_str()), (2, "ghost"));
        assert_eq!(issue.labels, ["bug"]);
    }

    #[test]
    fn errors_say_what_to_do() {
        let missing = http::with_handler(api, || user(UserInput { login: "nobody".into() }));
        assert!(matches!(missing, Err(ToolError::Failed(m)) if m.contains("user nobody not found")));
        let limited = http::with_handler(api, || user(UserInput { login: "limited".into() }));
        assert!(matches!(limited, Err(ToolError::Failed(m)) if m.contains("skillhost secret set github")));
        let bad = user(UserInput { login: "../admin".into() });
        assert!(matches!(bad, Err(ToolError::InvalidInput(_))));
        let denied = http::with_handler(
            |r| Err(HttpError::Denied { url: r.url().into(), message: "no".into() }),
            || user(UserInput { login: "x".into() }),
        );
        assert!(matches!(denied, Err(ToolError::Denied(_))));
    }
}
