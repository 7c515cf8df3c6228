/*
 * user_object.c: user objects (a destructor and a reference count) and the
 * references graphs hold on them.  The destructor runs on the thread that
 * drops the last reference (the driver would use one of its threads); a
 * graph's references are dropped when the graph is destroyed.
 */
#include <stdlib.h>

#include "graph.h"

struct CUuserObject_st {
    struct sim_obj obj;
    void *ptr;
    CUhostFn destroy;
    int64_t refs;
};

static void drop(struct CUuserObject_st *o, unsigned int count)
{
    if (__atomic_sub_fetch(&o->refs, (int64_t)count, __ATOMIC_ACQ_REL) > 0)
        return;
    sim_handle_del(o);
    o->obj.kind = 0;
    o->destroy(o->ptr);
    free(o);
}

CUresult cuUserObjectCreate(CUuserObject *object_out, void *ptr, CUhostFn destroy,
                            unsigned int initialRefcount, unsigned int flags)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!object_out || !destroy || !initialRefcount || flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUuserObject_st *o = calloc(1, sizeof *o);
    if (!o)
        return CUDA_ERROR_OUT_OF_MEMORY;
    o->obj.kind = SIM_K_USER_OBJECT;
    o->ptr = ptr;
    o->destroy = destroy;
    o->refs = initialRefcount;
    sim_handle_add(o);
    *object_out = o;
    return CUDA_SUCCESS;
}

CUresult cuUserObjectRetain(CUuserObject object, unsigned int count)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(object, SIM_K_USER_OBJECT) || !count)
        return CUDA_ERROR_INVALID_VALUE;
    __atomic_add_fetch(&object->refs, (int64_t)count, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

CUresult cuUserObjectRelease(CUuserObject object, unsigned int count)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(object, SIM_K_USER_OBJECT) || !count)
        return CUDA_ERROR_INVALID_VALUE;
    drop(object, count);
    return CUDA_SUCCESS;
}

CUresult cuGraphRetainUserObject(CUgraph graph, CUuserObject object, unsigned int count,
                                 unsigned int flags)
{
    CUresult r = sim_graph_ok(graph);
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(object, SIM_K_USER_OBJECT) || !count || flags > CU_GRAPH_USER_OBJECT_MOVE)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_graph_ref *v = realloc(graph->refs, (graph->nrefs + 1) * sizeof *v);
    if (!v)
        return CUDA_ERROR_OUT_OF_MEMORY;
    graph->refs = v;
    v[graph->nrefs++] = (struct sim_graph_ref){object, count};
    if (!(flags & CU_GRAPH_USER_OBJECT_MOVE)) /* MOVE takes the caller's references */
        __atomic_add_fetch(&object->refs, (int64_t)count, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

CUresult cuGraphReleaseUserObject(CUgraph graph, CUuserObject object, unsigned int count)
{
    CUresult r = sim_graph_ok(graph);
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(object, SIM_K_USER_OBJECT) || !count)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned int held = 0;
    for (size_t i = 0; i < graph->nrefs; i++)
        if (graph->refs[i].obj == object)
            held += graph->refs[i].count;
    if (held < count)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned int left = count;
    for (size_t i = 0; i < graph->nrefs && left; i++)
        if (graph->refs[i].obj == object) {
            unsigned int k = graph->refs[i].count < left ? graph->refs[i].count : left;
            graph->refs[i].count -= k;
            left -= k;
        }
    drop(object, count);
    return CUDA_SUCCESS;
}

void sim_graph_drop_refs(struct CUgraph_st *g)
{
    for (size_t i = 0; i < g->nrefs; i++)
        if (g->refs[i].count)
            drop(g->refs[i].obj, g->refs[i].count);
    free(g->refs);
    g->refs = NULL;
    g->nrefs = 0;
}
