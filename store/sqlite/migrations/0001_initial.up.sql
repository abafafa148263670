-- 0001: changebot's tables on SQLite, the same rows as PostgreSQL's
-- migrations 0001-0013 (store/postgres/migrations). Times are TEXT in UTC,
-- 'YYYY-MM-DD HH:MM:SS.ffffff', so text order is time order; JSON is TEXT.
CREATE TABLE operations (
    id               TEXT PRIMARY KEY,
    subject_id       TEXT NOT NULL,
    target_key       TEXT NOT NULL,
    project          TEXT NOT NULL,
    project_id       INTEGER NOT NULL DEFAULT 0,
    target_branch    TEXT NOT NULL DEFAULT '',
    source_branch    TEXT NOT NULL DEFAULT '',
    title            TEXT NOT NULL,
    description      TEXT NOT NULL DEFAULT '',
    files            TEXT NOT NULL DEFAULT '[]',
    requested_by     TEXT NOT NULL,
    approval_first   INTEGER NOT NULL DEFAULT 1,
    step             INTEGER NOT NULL,
    status           TEXT NOT NULL,
    version          INTEGER NOT NULL DEFAULT 1,
    ticket_id        TEXT NOT NULL DEFAULT '',
    mr_iid           INTEGER NOT NULL DEFAULT 0,
    mr_web_url       TEXT NOT NULL DEFAULT '',
    head_sha         TEXT NOT NULL DEFAULT '',
    pipeline_id      INTEGER NOT NULL DEFAULT 0,
    pipeline_url     TEXT NOT NULL DEFAULT '',
    merge_commit_sha TEXT NOT NULL DEFAULT '',
    rounds           INTEGER NOT NULL DEFAULT 0,
    detail           TEXT NOT NULL DEFAULT '',
    idempotency_key  TEXT,
    step_started_at  TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL
);
CREATE UNIQUE INDEX operations_idempotency_key ON operations (idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX operations_mr ON operations (project_id, mr_iid) WHERE mr_iid > 0;
CREATE INDEX operations_status_updated ON operations (status, updated_at);
CREATE INDEX operations_merge_commit ON operations (project_id, merge_commit_sha) WHERE merge_commit_sha <> '';

CREATE TABLE bindings (
    subject_id   TEXT NOT NULL,
    target_key   TEXT NOT NULL,
    operation_id TEXT NOT NULL REFERENCES operations (id),
    status       TEXT NOT NULL,
    version      INTEGER NOT NULL DEFAULT 1,
    updated_at   TEXT NOT NULL,
    PRIMARY KEY (subject_id, target_key)
);
CREATE INDEX bindings_operation ON bindings (operation_id);

CREATE TABLE change_events (
    operation_id   TEXT NOT NULL REFERENCES operations (id),
    seq            INTEGER NOT NULL,
    type           TEXT NOT NULL,
    from_step      INTEGER NOT NULL,
    to_step        INTEGER NOT NULL,
    from_status    TEXT NOT NULL,
    to_status      TEXT NOT NULL,
    actor          TEXT NOT NULL,
    source         TEXT NOT NULL,
    payload        TEXT NOT NULL DEFAULT '{}',
    schema_version INTEGER NOT NULL,
    occurred_at    TEXT NOT NULL,
    prev_hash      TEXT NOT NULL,
    hash           TEXT NOT NULL,
    PRIMARY KEY (operation_id, seq)
);

CREATE TABLE webhook_deliveries (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    dedupe_key   TEXT NOT NULL UNIQUE,
    event        TEXT NOT NULL,
    project_id   INTEGER NOT NULL DEFAULT 0,
    body         BLOB NOT NULL,
    received_at  TEXT NOT NULL,
    processed_at TEXT,
    outcome      TEXT NOT NULL DEFAULT ''
);
CREATE INDEX webhook_deliveries_received_at ON webhook_deliveries (received_at);

CREATE TABLE callback_requests (
    request_id   TEXT NOT NULL,
    kind         TEXT NOT NULL,
    operation_id TEXT NOT NULL,
    result       TEXT NOT NULL,
    received_at  TEXT NOT NULL,
    PRIMARY KEY (kind, request_id)
);
CREATE INDEX callback_requests_received_at ON callback_requests (received_at);

CREATE TABLE status_notes (
    project_id   INTEGER NOT NULL,
    mr_iid       INTEGER NOT NULL,
    note_id      INTEGER NOT NULL,
    operation_id TEXT NOT NULL,
    rendered_seq INTEGER NOT NULL,
    updated_at   TEXT NOT NULL,
    PRIMARY KEY (project_id, mr_iid)
);

CREATE TABLE status_note_claims (
    project_id    INTEGER NOT NULL,
    mr_iid        INTEGER NOT NULL,
    token         TEXT NOT NULL,
    claimed_until TEXT NOT NULL,
    PRIMARY KEY (project_id, mr_iid)
);

-- Tokens of commit claims: SQLite has no sequences; AUTOINCREMENT never
-- reuses an id, so a released claim's token is never minted again.
CREATE TABLE commit_claim_tokens (token INTEGER PRIMARY KEY AUTOINCREMENT);

CREATE TABLE commit_claims (
    run_id     TEXT NOT NULL,
    step       TEXT NOT NULL,
    status     TEXT NOT NULL,
    branch     TEXT NOT NULL DEFAULT '',
    seq        INTEGER NOT NULL DEFAULT 0,
    token      INTEGER NOT NULL,
    claimed_at TEXT NOT NULL,
    PRIMARY KEY (run_id, step)
);

CREATE TABLE note_commands (
    project_id  INTEGER NOT NULL,
    note_id     INTEGER NOT NULL,
    mr_iid      INTEGER NOT NULL,
    author      TEXT NOT NULL,
    outcome     TEXT NOT NULL DEFAULT '',
    received_at TEXT NOT NULL,
    PRIMARY KEY (project_id, note_id)
);
CREATE INDEX note_commands_author ON note_commands (author, received_at);

CREATE TABLE gitlab_approvals (
    operation_id TEXT NOT NULL REFERENCES operations (id),
    username     TEXT NOT NULL,
    source       TEXT NOT NULL,
    approved_at  TEXT NOT NULL,
    PRIMARY KEY (operation_id, username)
);

CREATE TABLE settings (
    key        TEXT NOT NULL,
    scope      TEXT NOT NULL CHECK (scope = 'global' OR scope LIKE 'project:_%'),
    value      TEXT NOT NULL,
    updated_by TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (key, scope)
);

CREATE TABLE settings_audit (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    key        TEXT NOT NULL,
    scope      TEXT NOT NULL,
    old_value  TEXT,
    new_value  TEXT,
    updated_by TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX settings_audit_key ON settings_audit (key, scope, id);

CREATE TABLE deploy_confirmations (
    project_id    INTEGER NOT NULL,
    target_branch TEXT NOT NULL,
    mr_iid        INTEGER NOT NULL,
    confirmed_at  TEXT NOT NULL,
    PRIMARY KEY (project_id, target_branch, mr_iid)
);

CREATE TABLE gitlab_account_waits (
    account       TEXT PRIMARY KEY,
    blocked_until TEXT NOT NULL,
    updated_at    TEXT NOT NULL
);
