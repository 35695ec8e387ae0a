//! `agentkit gitlab` and `agentkit bitbucket`: the channels and events of
//! a project, and replaying the providers' published payloads, with their
//! headers and signature or token, at an in-process server.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};

use super::{agentkit_with, fixtures};

const PACKS: &[(&str, &str)] = &[
    (
        "gitlab.toml",
        "kind = \"gitlab\"\nwebhook_secret = \"${GITLAB_WEBHOOK_SECRET}\"\nreply = false\n\n[[rules]]\nevent = \"merge_request\"\nactions = [\"open\"]\n[rules.turn]\nmessage = \"Review !{{ object_attributes.iid }}\"\n",
    ),
    (
        "bitbucket.toml",
        "kind = \"bitbucket\"\nwebhook_secret = \"${BITBUCKET_WEBHOOK_SECRET}\"\nreply = false\n\n[[rules]]\nevent = \"pull_request\"\nactions = [\"opened\"]\n[rules.turn]\nmessage = \"Review #{{ pullrequest.id }}\"\n\n[[rules]]\nevent = \"pullrequest:comment_created\"\nskip = true\n",
    ),
];

fn project(root: &Path) -> std::path::PathBuf {
    let dir = root.join("reviewer");
    let agent = dir.join("agent");
    std::fs::create_dir_all(agent.join("channels")).unwrap();
    std::fs::write(agent.join("agent.toml"), "model = \"test\"\n").unwrap();
    std::fs::write(agent.join("instructions.md"), "You review.\n").unwrap();
    for (name, text) in PACKS {
        std::fs::write(agent.join("channels").join(name), text).unwrap();
    }
    dir
}

#[test]
fn events_and_replay_work_for_gitlab_and_bitbucket() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path());
    let events = agentkit_with(&dir, &["bitbucket", "events", "--json"], |_| {});
    assert_eq!(events.code, 0, "{}", events.stderr);
    assert_eq!(
        serde_json::from_str::<Value>(&events.stdout).unwrap()["channels"],
        json!([{"slug": "reviewer", "channel": "bitbucket", "path": "/reviewer/v1/channels/bitbucket", "events": ["pull_request", "pullrequest:comment_created"]}])
    );
    let text = agentkit_with(&dir, &["gitlab", "events"], |_| {});
    assert_eq!(
        text.stdout.trim(),
        "/reviewer/v1/channels/gitlab  merge_request"
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let env = agentkit::EnvLookup(Arc::new(|name| match name {
        "GITLAB_WEBHOOK_SECRET" => Some("gl-secret".to_owned()),
        "BITBUCKET_WEBHOOK_SECRET" => Some("bb-secret".to_owned()),
        _ => None,
    }));
    let handle = rt
        .block_on(agentkit::serve(
            &dir,
            agentkit::ServeOptions {
                port: 0,
                state_root: Some(tmp.path().join("state")),
                env,
                ..Default::default()
            },
        ))
        .unwrap();
    let url = handle.url();
    let replay = |pack: &str, payload: &str, secret: &str| {
        let file = fixtures().join(payload);
        let run = agentkit_with(
            &dir,
            &[
                pack,
                "replay",
                "--payload",
                file.to_str().unwrap(),
                "--url",
                &url,
                "--secret",
                secret,
                "--json",
            ],
            |_| {},
        );
        let doc: Value = serde_json::from_str(&run.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}{}", run.stdout, run.stderr));
        (run.code, doc)
    };

    // Bitbucket: the event is guessed from the payload, the body signed.
    let (code, doc) = replay(
        "bitbucket",
        "bitbucket/cloud.pullrequest.created.json",
        "bb-secret",
    );
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc[0]["event"], "pullrequest:created");
    assert_eq!(doc[0]["status"], 202);
    assert_eq!(
        doc[0]["response"]["continuationToken"],
        "pr:kolaszek/repository-name#1"
    );
    let (code, doc) = replay(
        "bitbucket",
        "bitbucket/cloud.pullrequest.created.json",
        "nope",
    );
    assert_eq!((code, doc[0]["status"].clone()), (1, json!(401)));
    let (code, doc) = replay(
        "bitbucket",
        "bitbucket/cloud.pullrequest.comment_created.json",
        "bb-secret",
    );
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc[0]["event"], "pullrequest:comment_created");
    assert_eq!(doc[0]["response"]["skipped"], true);

    // GitLab: the event from `object_kind`, the secret as X-Gitlab-Token.
    let (code, doc) = replay("gitlab", "gitlab/merge_request.open.json", "gl-secret");
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc[0]["event"], "merge_request");
    assert_eq!(
        (
            doc[0]["status"].clone(),
            doc[0]["response"]["continuationToken"].clone()
        ),
        (json!(202), json!("mr:gitlabhq/gitlab-test!1"))
    );
    let (code, doc) = replay("gitlab", "gitlab/merge_request.open.json", "nope");
    assert_eq!((code, doc[0]["status"].clone()), (1, json!(401)));
    rt.block_on(handle.close());
}
