-- Accounts and private groups. Keep in step with ../mysql/00006_accounts.sql.

-- +goose Up
ALTER TABLE chat_groups ADD COLUMN invite_only INTEGER NOT NULL DEFAULT 0;
ALTER TABLE chat_groups ADD COLUMN created_by INTEGER NULL;
ALTER TABLE group_members ADD COLUMN joined_seq INTEGER NOT NULL DEFAULT 0;

CREATE TABLE group_invites (
    group_id   INTEGER NOT NULL REFERENCES chat_groups (group_id),
    user_id    INTEGER NOT NULL REFERENCES users (user_id),
    invited_by INTEGER NOT NULL,
    invited_us INTEGER NOT NULL,
    PRIMARY KEY (group_id, user_id)
);
CREATE INDEX ix_group_invites_user ON group_invites (user_id);

-- +goose Down
DROP TABLE group_invites;
ALTER TABLE group_members DROP COLUMN joined_seq;
ALTER TABLE chat_groups DROP COLUMN created_by;
ALTER TABLE chat_groups DROP COLUMN invite_only;
