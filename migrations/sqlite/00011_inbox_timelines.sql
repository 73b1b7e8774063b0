-- Direct messages on timelines: one cursor per user on their inbox (the
-- direct messages to them), as for groups. Keep in step with
-- ../mysql/00011_inbox_timelines.sql.

-- +goose Up
CREATE TABLE inbox_cursors (
    user_id   INTEGER NOT NULL PRIMARY KEY REFERENCES users (user_id),
    acked_seq INTEGER NOT NULL DEFAULT 0,
    sent_seq  INTEGER NOT NULL DEFAULT 0,
    sent_us   INTEGER NOT NULL DEFAULT 0,
    back_us   INTEGER NOT NULL DEFAULT 0,
    back_seq  INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE inbox_acks (
    user_id INTEGER NOT NULL REFERENCES users (user_id),
    msg_seq INTEGER NOT NULL,
    PRIMARY KEY (user_id, msg_seq)
);

INSERT INTO inbox_cursors (user_id, acked_seq, sent_seq, back_seq)
    SELECT x.user_id, x.a, x.a, x.a FROM (
        SELECT u.user_id, COALESCE(
            (SELECT MIN(r.msg_seq) - 1 FROM recipients r JOIN messages m ON m.msg_seq = r.msg_seq
             WHERE r.user_id = u.user_id AND m.to_user_id = u.user_id),
            (SELECT MAX(m.msg_seq) FROM messages m WHERE m.to_user_id = u.user_id),
            0) AS a
        FROM users u) x;

INSERT INTO inbox_acks (user_id, msg_seq)
    SELECT m.to_user_id, m.msg_seq FROM messages m JOIN inbox_cursors c ON c.user_id = m.to_user_id
    WHERE m.msg_seq > c.acked_seq
      AND NOT EXISTS (SELECT 1 FROM recipients r WHERE r.user_id = m.to_user_id AND r.msg_seq = m.msg_seq);

UPDATE group_cursors SET
    acked_seq = MIN(acked_seq, (SELECT MIN(r.msg_seq) - 1 FROM recipients r JOIN messages m ON m.msg_seq = r.msg_seq
        WHERE r.user_id = group_cursors.user_id AND m.to_group_id = group_cursors.group_id)),
    sent_seq = MIN(sent_seq, (SELECT MIN(r.msg_seq) - 1 FROM recipients r JOIN messages m ON m.msg_seq = r.msg_seq
        WHERE r.user_id = group_cursors.user_id AND m.to_group_id = group_cursors.group_id))
    WHERE EXISTS (SELECT 1 FROM recipients r JOIN messages m ON m.msg_seq = r.msg_seq
        WHERE r.user_id = group_cursors.user_id AND m.to_group_id = group_cursors.group_id);
INSERT INTO group_cursors (group_id, user_id, acked_seq, sent_seq, until_seq)
    SELECT l.group_id, l.user_id, l.lo - 1, l.lo - 1, l.hi FROM (
        SELECT r.user_id, m.to_group_id AS group_id, MIN(r.msg_seq) AS lo, MAX(r.msg_seq) AS hi
        FROM recipients r JOIN messages m ON m.msg_seq = r.msg_seq
        WHERE m.to_group_id IS NOT NULL GROUP BY r.user_id, m.to_group_id) l
    WHERE NOT EXISTS (SELECT 1 FROM group_cursors c WHERE c.group_id = l.group_id AND c.user_id = l.user_id);

DROP TABLE recipients;

-- +goose Down
CREATE TABLE recipients (
    user_id      INTEGER NOT NULL REFERENCES users (user_id),
    msg_seq      INTEGER NOT NULL REFERENCES messages (msg_seq) ON DELETE CASCADE,
    delivered_us INTEGER NULL,
    PRIMARY KEY (user_id, msg_seq)
);
CREATE INDEX ix_recipients_msg ON recipients (msg_seq);
CREATE INDEX ix_recipients_pending ON recipients (user_id, delivered_us, msg_seq);
INSERT INTO recipients (user_id, msg_seq)
    SELECT m.to_user_id, m.msg_seq FROM messages m JOIN inbox_cursors c ON c.user_id = m.to_user_id
    WHERE m.msg_seq > c.acked_seq
      AND NOT EXISTS (SELECT 1 FROM inbox_acks a WHERE a.user_id = m.to_user_id AND a.msg_seq = m.msg_seq);
DROP TABLE inbox_acks;
DROP TABLE inbox_cursors;
