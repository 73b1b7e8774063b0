-- Ring topology (resource P) and message queue (resource Q).
-- Times are stored as microseconds since the Unix epoch (UTC).
-- Keep in step with ../mysql/00001_init.sql.

-- +goose Up
CREATE TABLE nodes (
    node_id      INTEGER NOT NULL PRIMARY KEY,
    host         TEXT    NOT NULL,
    coord_port   INTEGER NOT NULL,
    client_port  INTEGER NOT NULL,
    successor_id INTEGER NULL REFERENCES nodes (node_id),
    added_us     INTEGER NOT NULL
);

CREATE TABLE ring_coordinator (
    id         INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    node_id    INTEGER NULL,
    epoch      INTEGER NOT NULL,
    changed_us INTEGER NOT NULL
);
INSERT INTO ring_coordinator (id, node_id, epoch, changed_us) VALUES (1, NULL, 0, 0);

CREATE TABLE coordinator_history (
    epoch      INTEGER NOT NULL PRIMARY KEY,
    node_id    INTEGER NOT NULL,
    claimed_us INTEGER NOT NULL
);

CREATE TABLE token_fence (
    id         INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    generation INTEGER NOT NULL,
    seq        INTEGER NOT NULL,
    changed_us INTEGER NOT NULL
);
INSERT INTO token_fence (id, generation, seq, changed_us) VALUES (1, 0, 0, 0);

CREATE TABLE users (
    user_id       INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    name          TEXT    NOT NULL UNIQUE,
    password_hash TEXT    NULL,
    created_us    INTEGER NOT NULL
);

CREATE TABLE chat_groups (
    group_id   INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    name       TEXT    NOT NULL UNIQUE,
    created_us INTEGER NOT NULL
);

CREATE TABLE group_members (
    group_id  INTEGER NOT NULL REFERENCES chat_groups (group_id),
    user_id   INTEGER NOT NULL REFERENCES users (user_id),
    joined_us INTEGER NOT NULL,
    PRIMARY KEY (group_id, user_id)
);
CREATE INDEX ix_group_members_user ON group_members (user_id);

CREATE TABLE presence (
    user_id  INTEGER NOT NULL PRIMARY KEY REFERENCES users (user_id),
    node_id  INTEGER NOT NULL,
    since_us INTEGER NOT NULL
);
CREATE INDEX ix_presence_node ON presence (node_id);

CREATE TABLE messages (
    msg_seq     INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    msg_id      TEXT    NOT NULL UNIQUE,
    sender_id   INTEGER NOT NULL REFERENCES users (user_id),
    to_user_id  INTEGER NULL REFERENCES users (user_id),
    to_group_id INTEGER NULL REFERENCES chat_groups (group_id),
    content     TEXT    NOT NULL,
    sent_us     INTEGER NOT NULL,
    stored_us   INTEGER NOT NULL,
    node_id     INTEGER NOT NULL
);
CREATE INDEX ix_messages_to_user ON messages (to_user_id, msg_seq);
CREATE INDEX ix_messages_to_group ON messages (to_group_id, msg_seq);
CREATE INDEX ix_messages_stored ON messages (stored_us);

CREATE TABLE recipients (
    user_id      INTEGER NOT NULL REFERENCES users (user_id),
    msg_seq      INTEGER NOT NULL REFERENCES messages (msg_seq) ON DELETE CASCADE,
    delivered_us INTEGER NULL,
    PRIMARY KEY (user_id, msg_seq)
);
CREATE INDEX ix_recipients_msg ON recipients (msg_seq);

-- +goose Down
DROP TABLE recipients;
DROP TABLE messages;
DROP TABLE presence;
DROP TABLE group_members;
DROP TABLE chat_groups;
DROP TABLE users;
DROP TABLE token_fence;
DROP TABLE coordinator_history;
DROP TABLE ring_coordinator;
DROP TABLE nodes;
