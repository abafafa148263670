-- 0024: a change that adopted a merge request a developer opened (issue 25
-- point 1): the create step records that merge request instead of opening
-- one, and letting it go leaves it open with its branch. At most one such
-- change per merge request is in progress (not VALIDATED, REJECTED or
-- CLOSED): a repeated hook, or a label and a comment, adopt it once.
ALTER TABLE operations ADD COLUMN adopted boolean NOT NULL DEFAULT false;
CREATE UNIQUE INDEX operations_adopted_mr ON operations (platform, project_id, mr_iid)
    WHERE adopted AND status NOT IN ('VALIDATED', 'REJECTED', 'CLOSED');
