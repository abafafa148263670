-- 0001: the change flow's tables (DESIGN §2, §4, §7).
CREATE TABLE operations (
    id              text PRIMARY KEY,
    subject_id      text NOT NULL,
    target_key      text NOT NULL,
    project         text NOT NULL,
    project_id      bigint NOT NULL DEFAULT 0,
    target_branch   text NOT NULL DEFAULT '',
    source_branch   text NOT NULL DEFAULT '',
    title           text NOT NULL,
    description     text NOT NULL DEFAULT '',
    files           jsonb NOT NULL DEFAULT '[]',
    requested_by    text NOT NULL,
    approval_first  boolean NOT NULL DEFAULT true,
    step            integer NOT NULL,
    status          text NOT NULL,
    version         bigint NOT NULL DEFAULT 1,
    ticket_id       text NOT NULL DEFAULT '',
    mr_iid          bigint NOT NULL DEFAULT 0,
    mr_web_url      text NOT NULL DEFAULT '',
    head_sha        text NOT NULL DEFAULT '',
    pipeline_id     bigint NOT NULL DEFAULT 0,
    pipeline_url    text NOT NULL DEFAULT '',
    merge_commit_sha text NOT NULL DEFAULT '',
    rounds          integer NOT NULL DEFAULT 0,
    detail          text NOT NULL DEFAULT '',
    idempotency_key text,
    step_started_at timestamptz NOT NULL,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL
);
CREATE UNIQUE INDEX operations_idempotency_key ON operations (idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX operations_mr ON operations (project_id, mr_iid) WHERE mr_iid > 0;
CREATE INDEX operations_status_updated ON operations (status, updated_at);
CREATE INDEX operations_merge_commit ON operations (project_id, merge_commit_sha) WHERE merge_commit_sha <> '';

CREATE TABLE bindings (
    subject_id   text NOT NULL,
    target_key   text NOT NULL,
    operation_id text NOT NULL REFERENCES operations (id),
    status       text NOT NULL,
    version      bigint NOT NULL DEFAULT 1,
    updated_at   timestamptz NOT NULL,
    PRIMARY KEY (subject_id, target_key)
);
CREATE INDEX bindings_operation ON bindings (operation_id);

CREATE TABLE change_events (
    operation_id   text NOT NULL REFERENCES operations (id),
    seq            bigint NOT NULL,
    type           text NOT NULL,
    from_step      integer NOT NULL,
    to_step        integer NOT NULL,
    from_status    text NOT NULL,
    to_status      text NOT NULL,
    actor          text NOT NULL,
    source         text NOT NULL,
    payload        jsonb NOT NULL DEFAULT '{}',
    schema_version integer NOT NULL,
    occurred_at    timestamptz NOT NULL,
    prev_hash      text NOT NULL,
    hash           text NOT NULL,
    PRIMARY KEY (operation_id, seq)
);

CREATE TABLE webhook_deliveries (
    id           bigserial PRIMARY KEY,
    dedupe_key   text NOT NULL UNIQUE,
    event        text NOT NULL,
    project_id   bigint NOT NULL DEFAULT 0,
    body         jsonb NOT NULL,
    received_at  timestamptz NOT NULL,
    processed_at timestamptz,
    outcome      text NOT NULL DEFAULT ''
);

CREATE TABLE callback_requests (
    request_id   text PRIMARY KEY,
    kind         text NOT NULL,
    operation_id text NOT NULL,
    result       text NOT NULL,
    received_at  timestamptz NOT NULL
);

CREATE TABLE status_notes (
    project_id   bigint NOT NULL,
    mr_iid       bigint NOT NULL,
    note_id      bigint NOT NULL,
    operation_id text NOT NULL,
    rendered_seq bigint NOT NULL,
    updated_at   timestamptz NOT NULL,
    PRIMARY KEY (project_id, mr_iid)
);
