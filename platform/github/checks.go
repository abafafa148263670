package github

import (
	"context"
	"errors"
	"fmt"

	gh "github.com/google/go-github/v93/github"

	"changebot/platform"
)

// PipelineCommits is how many of a branch's newest commits Pipelines
// synthesizes a pipeline for when no sha is given.
const PipelineCommits = 5

// checksOf reads every check of sha: its check runs (GET
// .../commits/{sha}/check-runs?filter=latest, the latest run per name;
// fixture api-checks-list-for-ref.json) and its commit statuses (GET
// .../commits/{sha}/status, the latest per context; fixtures
// api-repos-combined-status.json, api-real-combined-status.exchange.json).
// Neither endpoint includes the other's kind, so both are read, every page
// of 100 (listAll): GitHub answers at most 100 per page, newest first, so a
// failed or required check older than the newest 100 is on a later page.
func (c *Client) checksOf(ctx context.Context, r repoRef, sha string) ([]check, error) {
	runs, err := listAll(ctx, c, epCheckRunsList, func(ctx context.Context, page int) ([]*gh.CheckRun, int, *gh.Response, error) {
		res, resp, err := c.robot.Checks.ListCheckRunsForRef(ctx, r.owner, r.name, sha, &gh.ListCheckRunsOptions{
			Filter: new("latest"), ListOptions: gh.ListOptions{PerPage: pageSize, Page: page},
		})
		if res == nil {
			return nil, 0, resp, err
		}
		return res.CheckRuns, res.GetTotal(), resp, err
	})
	if err != nil {
		return nil, err
	}
	statuses, err := listAll(ctx, c, epCombinedStatusGet, func(ctx context.Context, page int) ([]*gh.RepoStatus, int, *gh.Response, error) {
		res, resp, err := c.robot.Repositories.GetCombinedStatus(ctx, r.owner, r.name, sha, &gh.ListOptions{PerPage: pageSize, Page: page})
		if res == nil {
			return nil, 0, resp, err
		}
		return res.Statuses, res.GetTotalCount(), resp, err
	})
	if err != nil {
		return nil, err
	}
	var out []check
	for _, cr := range runs {
		if cr != nil {
			out = append(out, check{id: cr.GetID(), name: cr.GetName(), status: checkRunStatus(cr.GetStatus(), cr.GetConclusion())})
		}
	}
	for _, st := range statuses {
		if st != nil {
			out = append(out, check{id: st.GetID(), name: st.GetContext(), status: commitStatus(st.GetState())})
		}
	}
	return out, nil
}

// listAll reads every page of a list whose answer names its total_count
// (check runs, combined statuses, check suites, workflow runs): fn reads
// one page (1-based) of pageSize and returns its items and the total. The
// next page is the Link header's rel="next" (docs.github.com "Using
// pagination in the REST API"); without one, it is the following page
// while fewer than total_count were read and the page was full. At most
// maxPages pages are read.
func listAll[T any](ctx context.Context, c *Client, endpoint string, fn func(ctx context.Context, page int) ([]T, int, *gh.Response, error)) ([]T, error) {
	var all []T
	page := 1
	for range maxPages {
		var items []T
		var total int
		_, resp, err := callResp(ctx, c, endpoint, func(ctx context.Context) (struct{}, *gh.Response, error) {
			var err error
			var r *gh.Response
			items, total, r, err = fn(ctx, page)
			return struct{}{}, r, err
		})
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		switch {
		case len(items) == 0 || len(all) >= total && (resp == nil || resp.NextPage == 0):
			return all, nil
		case resp != nil && resp.NextPage > page:
			page = resp.NextPage
		case len(all) < total && len(items) >= pageSize:
			page++
		default:
			return all, nil
		}
	}
	return all, nil
}

// requiredContexts returns the status contexts and check names the
// protection of branch requires (GET /repos/{o}/{r}/branches/{branch},
// protection.required_status_checks: contexts and checks[].context;
// fixture api-repos-branch-with-protection.json; readable with contents
// read, unlike the protection endpoint), cached for
// Config.RequiredContextsTTL. An unprotected branch requires none.
func (c *Client) requiredContexts(ctx context.Context, r repoRef, branch string) ([]string, error) {
	key := r.String() + ":" + branch
	now := c.now()
	if c.requiredTTL > 0 {
		c.mu.Lock()
		e, ok := c.required[key]
		c.mu.Unlock()
		if ok && now.Sub(e.at) < c.requiredTTL {
			return e.contexts, nil
		}
	}
	b, err := call(ctx, c, epRequiredChecksGet, func(ctx context.Context) (*gh.Branch, *gh.Response, error) {
		return c.robot.Repositories.GetBranch(ctx, r.owner, r.name, branch, 1)
	})
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	if rs := b.GetProtection().GetRequiredStatusChecks(); rs != nil {
		add := func(s string) {
			if s != "" && !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
		if rs.Contexts != nil {
			for _, s := range *rs.Contexts {
				add(s)
			}
		}
		if rs.Checks != nil {
			for _, ch := range *rs.Checks {
				if ch != nil {
					add(ch.Context)
				}
			}
		}
	}
	if c.requiredTTL > 0 {
		c.mu.Lock()
		c.required[key] = requiredEntry{contexts: out, at: now}
		c.mu.Unlock()
	}
	return out, nil
}

// headPipeline synthesizes the pipeline of an open pull request's head
// from its checks and its base branch's required contexts (synthesize).
func (c *Client) headPipeline(ctx context.Context, r repoRef, pr *gh.PullRequest) (*platform.Pipeline, error) {
	sha := pr.GetHead().GetSHA()
	if sha == "" {
		return nil, errNoHead
	}
	checks, err := c.checksOf(ctx, r, sha)
	if err != nil {
		return nil, err
	}
	required, err := c.requiredContexts(ctx, r, pr.GetBase().GetRef())
	if err != nil {
		return nil, err
	}
	return synthesize(sha, pr.GetHead().GetRef(), pr.GetHTMLURL()+"/checks", checks, required), nil
}

// Pipelines returns one pipeline per commit, newest first, synthesized from
// the commit's check runs and commit statuses (synthesize, without
// required contexts: those gate pull requests, not a branch): for sha when
// it is set, else for the PipelineCommits newest commits of ref (GET
// /repos/{o}/{r}/commits?sha=<ref>), newest first, stopping after the
// first whose pipeline succeeded (the older commits are not read: two
// reads per commit). A commit with no check and no status has no pipeline
// and is left out. Ref is ref as given. This is how the
// deploy wait finds a successful workflow run or check on the target
// branch at, or after, the merge commit.
func (c *Client) Pipelines(ctx context.Context, projectID int64, ref, sha string) ([]platform.Pipeline, error) {
	r, err := c.repo(ctx, projectID)
	if err != nil {
		return nil, fmt.Errorf("listing pipelines for ref %q sha %q: %w", ref, sha, err)
	}
	shas := []string{sha}
	if sha == "" {
		if ref == "" {
			return nil, fmt.Errorf("listing pipelines of %s: a ref or a sha is required on GitHub", r)
		}
		commits, err := call(ctx, c, epCommitsList, func(ctx context.Context) ([]*gh.RepositoryCommit, *gh.Response, error) {
			return c.robot.Repositories.ListCommits(ctx, r.owner, r.name, &gh.CommitsListOptions{SHA: ref, ListOptions: gh.ListOptions{PerPage: PipelineCommits}})
		})
		if err != nil {
			return nil, fmt.Errorf("listing pipelines of %s for ref %q: %w", r, ref, err)
		}
		shas = shas[:0]
		for _, cm := range commits {
			shas = append(shas, cm.GetSHA())
		}
	}
	out := []platform.Pipeline{}
	for _, s := range shas {
		checks, err := c.checksOf(ctx, r, s)
		if err != nil {
			return nil, fmt.Errorf("listing pipelines of %s for ref %q sha %q: %w", r, ref, s, err)
		}
		if p := synthesize(s, ref, "", checks, nil); p != nil {
			out = append(out, *p)
			if sha == "" && p.Status == platform.PipelineSuccess {
				break
			}
		}
	}
	return out, nil
}

// Conclusions a re-run is for.
var rerunConclusions = map[string]bool{"failure": true, "cancelled": true, "timed_out": true, "startup_failure": true, "action_required": true}

// CreateMergeRequestPipeline runs the checks of pull request #iid's head
// again: it re-runs the failed jobs of every GitHub Actions workflow run of
// the head that failed, was cancelled or timed out (GET
// .../actions/runs?head_sha=, then POST
// .../actions/runs/{id}/rerun-failed-jobs), and re-requests every other
// App's check suite of the head that so concluded (GET
// .../commits/{sha}/check-suites, POST .../check-suites/{id}/rerequest).
// Commit statuses of an external CI cannot be re-run through GitHub. When
// something was re-run the answer is the head's pipeline as a new one:
// pending, with ID one above the head's synthesized pipeline now, so that
// the old result (lower id) is not taken for the new one's (the re-run
// check runs get larger ids). When nothing could be re-run it is the
// head's pipeline as it is.
func (c *Client) CreateMergeRequestPipeline(ctx context.Context, projectID, iid int64) (platform.Pipeline, error) {
	r, err := c.repo(ctx, projectID)
	if err != nil {
		return platform.Pipeline{}, fmt.Errorf("re-running the checks of pull request #%d: %w", iid, err)
	}
	fail := func(err error) (platform.Pipeline, error) {
		return platform.Pipeline{}, fmt.Errorf("re-running the checks of pull request #%d of %s: %w", iid, r, err)
	}
	pr, err := c.readPull(ctx, r, iid)
	if err != nil {
		return fail(err)
	}
	head, err := c.headPipeline(ctx, r, pr)
	if err != nil {
		return fail(err)
	}
	sha := pr.GetHead().GetSHA()
	runs, err := listAll(ctx, c, epWorkflowRunsList, func(ctx context.Context, page int) ([]*gh.WorkflowRun, int, *gh.Response, error) {
		res, resp, err := c.robot.Actions.ListRepositoryWorkflowRuns(ctx, r.owner, r.name, &gh.ListWorkflowRunsOptions{HeadSHA: sha, ListOptions: gh.ListOptions{PerPage: pageSize, Page: page}})
		if res == nil {
			return nil, 0, resp, err
		}
		return res.WorkflowRuns, res.GetTotalCount(), resp, err
	})
	if err != nil {
		return fail(err)
	}
	actionsSuites := map[int64]bool{}
	rerun := 0
	for _, run := range runs {
		actionsSuites[run.GetCheckSuiteID()] = true
		if run.GetStatus() != "completed" || !rerunConclusions[run.GetConclusion()] {
			continue
		}
		_, err := call(ctx, c, epWorkflowRunRerun, func(ctx context.Context) (struct{}, *gh.Response, error) {
			resp, err := c.robot.Actions.RerunFailedJobsByID(ctx, r.owner, r.name, run.GetID())
			return struct{}{}, resp, err
		})
		if err != nil {
			return fail(err)
		}
		rerun++
	}
	suites, err := listAll(ctx, c, epCheckSuitesList, func(ctx context.Context, page int) ([]*gh.CheckSuite, int, *gh.Response, error) {
		res, resp, err := c.robot.Checks.ListCheckSuitesForRef(ctx, r.owner, r.name, sha, &gh.ListCheckSuiteOptions{ListOptions: gh.ListOptions{PerPage: pageSize, Page: page}})
		if res == nil {
			return nil, 0, resp, err
		}
		return res.CheckSuites, res.GetTotal(), resp, err
	})
	if err != nil {
		return fail(err)
	}
	for _, s := range suites {
		if actionsSuites[s.GetID()] || s.GetApp().GetSlug() == "github-actions" || s.GetStatus() != "completed" || !rerunConclusions[s.GetConclusion()] {
			continue
		}
		_, err := call(ctx, c, epCheckSuiteRerequest, func(ctx context.Context) (struct{}, *gh.Response, error) {
			resp, err := c.robot.Checks.ReRequestCheckSuite(ctx, r.owner, r.name, s.GetID())
			return struct{}{}, resp, err
		})
		// GitHub lets only the suite's own App re-request it: a refusal
		// leaves that suite as it is.
		switch {
		case err == nil:
			rerun++
		case !errors.Is(err, platform.ErrForbidden) && !errors.Is(err, platform.ErrNotFound):
			return fail(err)
		}
	}
	if rerun == 0 && head != nil {
		// Nothing failed that GitHub can run again: the head's pipeline
		// stays the one to wait for.
		return *head, nil
	}
	p := platform.Pipeline{SHA: sha, Ref: pr.GetHead().GetRef(), Status: pipelinePending, WebURL: pr.GetHTMLURL() + "/checks", Source: "github_checks"}
	if head != nil {
		p.ID = head.ID + 1
	}
	return p, nil
}
