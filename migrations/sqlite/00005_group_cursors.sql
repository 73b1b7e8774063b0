-- Group messages are stored once; each member's delivery state is a cursor
-- on the group's timeline. Keep in step with ../mysql/00005_group_cursors.sql.

-- +goose Up
ALTER TABLE chat_groups ADD COLUMN last_seq INTEGER NOT NULL DEFAULT 0;
UPDATE chat_groups SET last_seq = COALESCE((SELECT MAX(m.msg_seq) FROM messages m WHERE m.to_group_id = chat_groups.group_id), 0);

CREATE TABLE group_cursors (
    group_id  INTEGER NOT NULL REFERENCES chat_groups (group_id),
    user_id   INTEGER NOT NULL REFERENCES users (user_id),
    acked_seq INTEGER NOT NULL,
    sent_seq  INTEGER NOT NULL,
    until_seq INTEGER NULL,
    PRIMARY KEY (group_id, user_id)
);
CREATE INDEX ix_group_cursors_user ON group_cursors (user_id);
CREATE INDEX ix_group_cursors_acked ON group_cursors (group_id, acked_seq);
INSERT INTO group_cursors (group_id, user_id, acked_seq, sent_seq, until_seq)
    SELECT gm.group_id, gm.user_id, g.last_seq, g.last_seq, NULL
    FROM group_members gm JOIN chat_groups g ON g.group_id = gm.group_id;

CREATE INDEX ix_recipients_pending ON recipients (user_id, delivered_us, msg_seq);

-- +goose Down
DROP INDEX ix_recipients_pending;
DROP TABLE group_cursors;
ALTER TABLE chat_groups DROP COLUMN last_seq;
