-- 0007: runtime settings shared by every replica (issue 4 point 9), and the
-- audit of every change, written in the same transaction.
CREATE TABLE settings (
    key         text NOT NULL,
    scope       text NOT NULL CHECK (scope = 'global' OR scope LIKE 'project:_%'),
    value       jsonb NOT NULL,
    updated_by  text NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (key, scope)
);

CREATE TABLE settings_audit (
    id          bigserial PRIMARY KEY,
    key         text NOT NULL,
    scope       text NOT NULL,
    old_value   jsonb,
    new_value   jsonb,
    updated_by  text NOT NULL,
    updated_at  timestamptz NOT NULL
);
CREATE INDEX settings_audit_key ON settings_audit (key, scope, id);
