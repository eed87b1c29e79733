-- Records of every tenant and kind (memory, tools, and later session
-- checkpoints), and the outcomes of recent writes for idempotent retries.
-- Tenants and keys are bytea, not text: keys are any UTF-8 string the
-- handlers accept, NUL included, which text cannot hold, and bytea sorts
-- byte by byte as bbolt does, so List orders keys the same in both stores.

CREATE TABLE codeexec_records (
    tenant   bytea       NOT NULL,
    kind     text        NOT NULL,
    key      bytea       NOT NULL,
    value    bytea       NOT NULL,
    meta     bytea       NOT NULL,
    created  timestamptz NOT NULL,
    updated  timestamptz NOT NULL,
    revision bigint      NOT NULL CHECK (revision > 0),
    PRIMARY KEY (tenant, kind, key)
);

-- One row per write that carried a request ID, kept for an hour: a retry
-- of a write whose answer was lost (a failover between commit and reply)
-- finds what the first attempt did here instead of writing again. op is 1
-- for a put (revision, created, updated, value_len describe the record it
-- wrote) and 2 for a delete (deleted says whether it removed a record).
CREATE TABLE codeexec_requests (
    id        bytea       PRIMARY KEY,
    at        timestamptz NOT NULL,
    op        smallint    NOT NULL,
    tenant    bytea       NOT NULL,
    kind      text        NOT NULL,
    key       bytea       NOT NULL,
    deleted   boolean,
    revision  bigint,
    created   timestamptz,
    updated   timestamptz,
    value_len integer
);

CREATE INDEX codeexec_requests_at ON codeexec_requests (at);
