-- Accounts and private groups.
-- An invite-only group is joined only with an invitation from a member (its
-- creator first); created_by is the user who created the group (NULL for
-- groups created before this version). joined_seq is the newest message
-- sequence when the membership began: a member's group history starts after
-- it (0 for memberships from before this version: they keep their history).

-- +goose Up
ALTER TABLE chat_groups ADD COLUMN invite_only TINYINT NOT NULL DEFAULT 0;
ALTER TABLE chat_groups ADD COLUMN created_by BIGINT NULL;
ALTER TABLE group_members ADD COLUMN joined_seq BIGINT NOT NULL DEFAULT 0;

CREATE TABLE group_invites (
    group_id   BIGINT NOT NULL,
    user_id    BIGINT NOT NULL,
    invited_by BIGINT NOT NULL,
    invited_us BIGINT NOT NULL,
    PRIMARY KEY (group_id, user_id),
    KEY ix_group_invites_user (user_id),
    CONSTRAINT fk_group_invites_group FOREIGN KEY (group_id) REFERENCES chat_groups (group_id),
    CONSTRAINT fk_group_invites_user FOREIGN KEY (user_id) REFERENCES users (user_id)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE group_invites;
ALTER TABLE group_members DROP COLUMN joined_seq;
ALTER TABLE chat_groups DROP COLUMN created_by;
ALTER TABLE chat_groups DROP COLUMN invite_only;
